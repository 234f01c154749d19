package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// postgres is a real PostgreSQL as tests/support/postgres_server.cc starts one: initdb into a
// temporary directory, a free loopback port, as the unprivileged user nobody when run as root.
type postgres struct {
	root    string
	process *exec.Cmd
	URL     string
}

func binDir() (string, error) {
	if dir := os.Getenv("DLOCK_PG_BIN_DIR"); dir != "" {
		return dir, nil
	}
	for _, version := range []string{"15", "16", "17", "14", "13"} {
		dir := "/usr/lib/postgresql/" + version + "/bin"
		if _, err := os.Stat(dir + "/postgres"); err == nil {
			return dir, nil
		}
	}
	return "", fmt.Errorf("PostgreSQL server binaries not found (install postgresql-15)")
}

func freePort() (int, error) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer listener.Close()
	return listener.Addr().(*net.TCPAddr).Port, nil
}

func startPostgres(t *testing.T) *postgres {
	t.Helper()
	bin, err := binDir()
	if err != nil {
		t.Fatal(err)
	}
	root, err := os.MkdirTemp("", "dlock-go-pg-")
	if err != nil {
		t.Fatal(err)
	}
	p := &postgres{root: root}
	t.Cleanup(p.stop)
	var credential *syscall.Credential
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root.
		nobody, err := user.Lookup("nobody")
		if err != nil {
			t.Fatal(err)
		}
		uid, _ := strconv.Atoi(nobody.Uid)
		gid, _ := strconv.Atoi(nobody.Gid)
		if err := os.Chown(root, uid, gid); err != nil {
			t.Fatal(err)
		}
		credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	command := func(args ...string) *exec.Cmd {
		c := exec.Command(args[0], args[1:]...)
		c.Env = []string{"LC_ALL=C", "PATH=/usr/bin:/bin"}
		c.Dir = root
		c.SysProcAttr = &syscall.SysProcAttr{Credential: credential}
		return c
	}
	data := filepath.Join(root, "data")
	if out, err := command(bin+"/initdb", "-D", data, "-U", "dlock", "--auth=trust", "-E", "UTF8",
		"--no-sync", "--no-instructions").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	p.process = command(bin+"/postgres", "-D", data, "-p", strconv.Itoa(port), "-c",
		"listen_addresses=127.0.0.1", "-c", "unix_socket_directories=", "-c", "fsync=off")
	if err := p.process.Start(); err != nil {
		t.Fatal(err)
	}
	p.URL = fmt.Sprintf("postgresql://dlock@127.0.0.1:%d/postgres?connect_timeout=2", port)
	for deadline := time.Now().Add(60 * time.Second); ; {
		conn, err := pgx.Connect(context.Background(), p.URL)
		if err == nil {
			conn.Close(context.Background())
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("PostgreSQL not ready after 60 s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (p *postgres) stop() {
	if p.process != nil && p.process.Process != nil {
		_ = p.process.Process.Signal(syscall.SIGINT) // fast shutdown
		done := make(chan struct{})
		go func() { _ = p.process.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = p.process.Process.Kill()
			<-done
		}
	}
	_ = os.RemoveAll(p.root)
}
