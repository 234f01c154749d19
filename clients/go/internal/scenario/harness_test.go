package scenario

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strings"
	"time"
)

// harness drives tests/clients/harness.cc (tests/clients/README.md) through a pipe: the servers
// of one backend, started once per test run.
type harness struct {
	backend    string
	process    *exec.Cmd
	stdin      io.WriteCloser
	stdout     *bufio.Reader
	Servers    []string          `json:"servers"`
	AuthServer string            `json:"auth_server"`
	TLSServer  string            `json:"tls_server"`
	TLS        map[string]string `json:"tls"`
	AdminToken string            `json:"admin_token"`
	Tokens     map[string]string `json:"tokens"`
	stopped    map[string]bool   // servers (and "backend") a scenario left down
}

func startHarness(binary, backend string) (*harness, error) {
	h := &harness{backend: backend, process: exec.Command(binary, backend), stopped: map[string]bool{}}
	var err error
	if h.stdin, err = h.process.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := h.process.StdoutPipe()
	if err != nil {
		return nil, err
	}
	h.stdout = bufio.NewReader(stdout)
	if err := h.process.Start(); err != nil {
		return nil, err
	}
	// The first line, once every server is ready: bounded, so that a harness that hangs fails
	// the run with a reason instead of waiting out CTest's timeout.
	type first struct {
		line string
		err  error
	}
	read := make(chan first, 1)
	go func() {
		line, err := h.stdout.ReadString('\n')
		read <- first{line, err}
	}()
	var line string
	select {
	case got := <-read:
		line, err = got.line, got.err
	case <-time.After(120 * time.Second):
		_ = h.process.Process.Kill()
		return nil, fmt.Errorf("harness for %s: not ready after 120 s", backend)
	}
	if err == nil {
		err = json.Unmarshal([]byte(line), h)
	}
	if err != nil || len(h.Servers) == 0 {
		h.close()
		return nil, fmt.Errorf("harness for %s did not start: %q %v", backend, line, err)
	}
	return h, nil
}

func (h *harness) command(line string) error {
	if _, err := io.WriteString(h.stdin, line+"\n"); err != nil {
		return err
	}
	text, err := h.stdout.ReadString('\n')
	if err != nil {
		return fmt.Errorf("harness for %s exited: %v", h.backend, err)
	}
	var answer struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(text), &answer); err != nil || !answer.OK {
		return fmt.Errorf("%s: %s %v", line, answer.Error, err)
	}
	words := strings.Fields(line)
	what := words[len(words)-1]
	if strings.HasPrefix(words[0], "backend_") {
		what = "backend"
	}
	switch words[0] {
	case "kill9", "stop", "backend_stop":
		h.stopped[what] = true
	case "start", "restart", "backend_start":
		delete(h.stopped, what)
	}
	return nil
}

// bringBack starts whatever a scenario left stopped, so the next one finds every server up.
func (h *harness) bringBack() error {
	if h.stopped["backend"] {
		if err := h.command("backend_start"); err != nil {
			return err
		}
	}
	var servers []string
	for server := range h.stopped {
		servers = append(servers, server)
	}
	sort.Strings(servers)
	for _, server := range servers {
		if err := h.command("start " + server); err != nil {
			return err
		}
	}
	return nil
}

func (h *harness) close() {
	_, _ = io.WriteString(h.stdin, "quit\n")
	_ = h.stdin.Close()
	_ = h.process.Wait()
}
