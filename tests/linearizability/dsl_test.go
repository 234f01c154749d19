package lincheck

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A compact way to write the unit tests' histories, one call per line:
//
//	<client> <session> <op> [input k=v ...] @<invoke ms>-<complete ms | ?> -> <ok | unknown | error code> [output k=v ...]
//
// e.g. `1 s1 acquire ttl=1000 @0-10 -> ok token=5`. Input keys: key (default k), mode, lease,
// ttl, wait, limit, token, value, delay, server. Output keys: token, ttl, value, session,
// holders (s1#3,s2#4 or "none"), revoked. Times are in milliseconds.
func parseHistory(t *testing.T, primitive, text string) *History {
	t.Helper()
	file := &HistoryJSON{}
	for lineNo, line := range strings.Split(strings.TrimSpace(text), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		op, err := parseCall(primitive, line)
		if err != nil {
			t.Fatalf("line %d %q: %v", lineNo+1, line, err)
		}
		file.Operations = append(file.Operations, op)
	}
	h, err := FromJSON(file)
	if err != nil {
		t.Fatalf("history: %v", err)
	}
	return h
}

func msToNs(text string) (int64, error) {
	v, err := strconv.ParseFloat(text, 64)
	return int64(v * 1e6), err
}

func parseCall(primitive, line string) (OperationJSON, error) {
	call, result, found := strings.Cut(line, "->")
	if !found {
		return OperationJSON{}, fmt.Errorf("no ->")
	}
	fields := strings.Fields(call)
	if len(fields) < 4 {
		return OperationJSON{}, fmt.Errorf("want <client> <session> <op> ... @<times>")
	}
	client, err := strconv.Atoi(fields[0])
	if err != nil {
		return OperationJSON{}, err
	}
	op := OperationJSON{Client: client, Session: fields[1], Op: fields[2], Key: "k", Primitive: primitive}
	if op.Session == "-" {
		op.Session = ""
	}
	for _, field := range fields[3:] {
		if strings.HasPrefix(field, "@") {
			invoke, complete, _ := strings.Cut(field[1:], "-")
			if op.InvokeNs, err = msToNs(invoke); err != nil {
				return op, err
			}
			if complete != "?" {
				if op.CompleteNs, err = msToNs(complete); err != nil {
					return op, err
				}
			}
			continue
		}
		k, v, _ := strings.Cut(field, "=")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "key":
			op.Key = v
		case "mode":
			op.Input.Mode = v
		case "lease":
			op.Input.Lease = v
		case "ttl":
			op.Input.TTLMs = n
		case "wait":
			op.Input.WaitMs = n
		case "limit":
			op.Input.Limit = int(n)
		case "token":
			op.Input.Token = uint64(n)
		case "value":
			op.Input.Value = v
		case "delay":
			op.Input.LockDelayMs = n
		case "server":
			op.Server = v
		default:
			return op, fmt.Errorf("unknown input field %q", k)
		}
	}
	results := strings.Fields(result)
	switch results[0] {
	case "ok", "unknown":
		op.Outcome = results[0]
	default:
		op.Outcome = "fail"
		op.Output.Error = results[0]
	}
	for _, field := range results[1:] {
		k, v, _ := strings.Cut(field, "=")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "token":
			op.Output.Token = uint64(n)
		case "ttl":
			op.Output.TTLMs = n
		case "value":
			op.Output.Value = v
		case "session":
			op.Output.Session = v
		case "revoked":
			op.Output.Revoked = v == "true"
		case "holders":
			op.Output.Holders = []HolderJSON{}
			if v == "none" {
				continue
			}
			for _, h := range strings.Split(v, ",") {
				session, token, _ := strings.Cut(h, "#")
				n, _ := strconv.ParseUint(token, 10, 64)
				op.Output.Holders = append(op.Output.Holders, HolderJSON{Session: session, Token: n})
			}
		default:
			return op, fmt.Errorf("unknown output field %q", k)
		}
	}
	return op, nil
}

// verdict checks `text` as a history of `primitive` and returns the model's verdict.
func verdict(t *testing.T, primitive, text string) Result {
	t.Helper()
	return CheckModel(parseHistory(t, primitive, text), primitive, 10*time.Second)
}

type historyCase struct {
	name    string
	history string
	want    Verdict
}

func runCases(t *testing.T, primitive string, cases []historyCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := verdict(t, primitive, c.history)
			if r.Verdict != c.want {
				t.Fatalf("verdict %s, want %s\n%s", r.Verdict, c.want, strings.Join(r.Explanations, "\n"))
			}
			if r.Verdict == VerdictIllegal && len(r.Explanations) == 0 {
				t.Fatalf("illegal without an explanation")
			}
		})
	}
}
