package dlock

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"
)

// DefaultServer is the server when neither Config.Servers nor DLOCK_SERVER names one.
const DefaultServer = "http://127.0.0.1:7070"

// Config of a [Client]. Every field has an environment fallback, the same as the dlock CLI's;
// a field that is set wins over its variable. The zero Config talks to DLOCK_SERVER (else
// DefaultServer) with the defaults below.
type Config struct {
	// Servers: several dlockd sharing one backend (failover). Empty: DLOCK_SERVER, a
	// comma-separated list, else DefaultServer.
	Servers []string
	// Token is the bearer token (contract C6); else the first line of TokenFile; else
	// DLOCK_TOKEN; else the first line of the file DLOCK_TOKEN_FILE names.
	Token     string
	TokenFile string
	// AdminToken for Revoke and ClearDelay; else DLOCK_ADMIN_TOKEN; else Token.
	AdminToken string
	// CAFile verifies an https server (else DLOCK_CACERT; else the system's roots);
	// CertFile and KeyFile present a client certificate (mTLS; else DLOCK_CERT, DLOCK_KEY).
	CAFile, CertFile, KeyFile string
	// ClockDrift is the clock-rate allowance of every client deadline (ADR-0012), a fraction in
	// (0, 0.5); 0: DLOCK_CLOCK_DRIFT (e.g. "0.01" or "1%"), else DefaultClockDrift.
	ClockDrift float64
	// RequestTimeout bounds one exchange (default 10 s; a waiting call adds its wait).
	RequestTimeout time.Duration
	// RetryBudget bounds a call's retries on unavailable servers (default 15 s).
	RetryBudget time.Duration
	// BackoffInitial and BackoffMax shape the back-off between retries (default 50 ms, 2 s).
	BackoffInitial, BackoffMax time.Duration
	// Namespace of every key, semaphore and election name; empty: DLOCK_NAMESPACE.
	Namespace string
}

var bearerPattern = regexp.MustCompile(`^[A-Za-z0-9\-._~+/]+=*$`)

func env(name string) string { return strings.TrimSpace(os.Getenv(name)) }

func checkBearer(token, name string) (string, error) {
	if !bearerPattern.MatchString(token) {
		return "", invalid(name, "%s: not a bearer token (letters, digits and -._~+/, then optional '=' padding; e.g. from dlock token new)", name)
	}
	return token, nil
}

// readTokenFile: the first line of path, trailing blanks removed; errors name the file, never
// a token.
func readTokenFile(path, name string) (string, error) {
	file, err := os.Open(path)
	if err != nil {
		return "", invalid(name, "%s: cannot read a token from %q: %v", name, path, err)
	}
	defer file.Close()
	line, err := bufio.NewReader(file).ReadString('\n')
	if err != nil && line == "" {
		return "", invalid(name, "%s: the first line of %q is empty", name, path)
	}
	line = strings.TrimRight(line, " \t\r\n")
	if line == "" {
		return "", invalid(name, "%s: the first line of %q is empty", name, path)
	}
	return checkBearer(line, name+" ("+path+")")
}

func resolveToken(token, tokenFile string) (string, error) {
	switch {
	case token != "":
		return checkBearer(token, "token")
	case tokenFile != "":
		return readTokenFile(tokenFile, "token_file")
	case env("DLOCK_TOKEN") != "":
		return checkBearer(env("DLOCK_TOKEN"), "DLOCK_TOKEN")
	case env("DLOCK_TOKEN_FILE") != "":
		return readTokenFile(env("DLOCK_TOKEN_FILE"), "DLOCK_TOKEN_FILE")
	}
	return "", nil
}

func resolveServers(servers []string) ([]string, error) {
	if len(servers) == 0 {
		from := env("DLOCK_SERVER")
		if from == "" {
			from = DefaultServer
		}
		servers = strings.Split(from, ",")
	}
	var listed []string
	for _, s := range servers {
		s = strings.TrimRight(strings.TrimSpace(s), "/")
		if s == "" {
			continue
		}
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, invalid("server", "server: %q is not an http:// or https:// URL", s)
		}
		listed = append(listed, s)
	}
	if len(listed) == 0 {
		return nil, invalid("server", "server: no server URL given")
	}
	return listed, nil
}

// tlsConfig: TLS 1.2 or later, the server's chain verified (caFile or the system's roots) and
// its name checked; certFile/keyFile present a client certificate (mTLS). There is no switch to
// turn verification off.
func tlsConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	config := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, invalid("tls", "tls: cannot read the CA file: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, invalid("tls", "tls: no PEM certificate in %q", caFile)
		}
		config.RootCAs = pool
	}
	if certFile != "" {
		if keyFile == "" {
			keyFile = certFile
		}
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, invalid("tls", "tls: cannot load the client certificate: %v", err)
		}
		config.Certificates = []tls.Certificate{pair}
	}
	return config, nil
}

func orEnv(value, name string) string {
	if value != "" {
		return value
	}
	return env(name)
}

func orDefault(value, fallback time.Duration) time.Duration {
	if value > 0 {
		return value
	}
	return fallback
}
