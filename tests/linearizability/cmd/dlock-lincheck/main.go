// Command dlock-lincheck checks a dlock history file for linearizability, one model per
// primitive, partitioned by key (tests/linearizability/README.md).
//
//	dlock-lincheck [-time-limit 60s] [-html-dir DIR] [-require mutex,election]
//	               [-known waiter-held-at-deadline] history.json
//
// Exit status: 0 when every model is ok (or has no operations and is not required), 1 when one
// is illegal, 2 when one is undecided within the time limit (never a pass) or a required model
// has no operations, 3 for a bad command line or history file.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	lincheck "dlock.dev/tests/linearizability"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("dlock-lincheck", flag.ContinueOnError)
	flags.SetOutput(stderr)
	limit := flags.Duration("time-limit", 60*time.Second, "time limit per model; past it the verdict is undecided")
	htmlDir := flags.String("html-dir", "", "write Porcupine's visualisation of each illegal model's history here")
	require := flags.String("require", "", "comma-separated models that must have operations")
	known := flags.String("known", "", "a known finding to report apart, not fail on: "+
		lincheck.KnownWaiterHeldAtDeadline+" (README.md \"Found\")")
	flags.Usage = func() {
		fmt.Fprintf(stderr, "usage: dlock-lincheck [flags] history.json\n")
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		return 3
	}
	if flags.NArg() != 1 {
		flags.Usage()
		return 3
	}
	history, err := lincheck.LoadFile(flags.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "dlock-lincheck: %v\n", err)
		return 3
	}
	required := map[string]bool{}
	for _, name := range strings.Split(*require, ",") {
		if name = strings.TrimSpace(name); name != "" {
			required[name] = true
		}
	}
	for name := range required {
		if !isPrimitive(name) {
			fmt.Fprintf(stderr, "dlock-lincheck: -require: unknown model %q\n", name)
			return 3
		}
	}
	var asRecorded []lincheck.Result
	switch *known {
	case "":
	case lincheck.KnownWaiterHeldAtDeadline:
		asRecorded = lincheck.Check(history, *limit)
		excused := lincheck.ExcuseWaiterHeldAtDeadline(history)
		fmt.Fprintf(stdout, "known      %s: %d held answers of waiting acquires at their deadline "+
			"checked as unknown outcomes\n", *known, excused)
	default:
		fmt.Fprintf(stderr, "dlock-lincheck: -known: unknown finding %q\n", *known)
		return 3
	}
	status := 0
	var results []lincheck.Result
	if asRecorded == nil {
		results = lincheck.Check(history, *limit)
	} else {
		// A model ok as recorded is ok with the known finding excused (that only admits more
		// histories): only the others are checked again -- which also spares the search the
		// excused calls, open to the end of the history, where it does not need them.
		for _, r := range asRecorded {
			if r.Verdict != lincheck.VerdictIllegal && r.Verdict != lincheck.VerdictUndecided {
				results = append(results, r)
			} else {
				results = append(results, lincheck.CheckModel(history, r.Model, *limit))
			}
		}
	}
	reportKnown(stdout, *known, asRecorded, results)
	for i := range results {
		r := &results[i]
		fmt.Fprintf(stdout, "%-10s %-9s %d operations (%d unknown), %d keys, %.2fs\n", r.Model,
			r.Verdict, r.Operations, r.Unknown, r.Keys, r.Elapsed.Seconds())
		switch r.Verdict {
		case lincheck.VerdictOk:
			if r.Bound > 0 {
				fmt.Fprintf(stdout, "  undecided with unknown outcomes open to the end; ok with each taking "+
					"effect, or not, within %s of its call (a linearization of the history as recorded)\n", r.Bound)
			}
		case lincheck.VerdictIllegal:
			status = 1
			for _, explanation := range r.Explanations {
				fmt.Fprintf(stdout, "%s\n", explanation)
			}
			if *htmlDir != "" {
				path, err := r.Visualize(*htmlDir)
				if err != nil {
					fmt.Fprintf(stderr, "dlock-lincheck: visualisation: %v\n", err)
				} else {
					fmt.Fprintf(stdout, "  visualisation: %s\n", path)
				}
			}
		case lincheck.VerdictUndecided:
			fmt.Fprintf(stdout, "  not decided within %s: not a pass\n", *limit)
			if status == 0 {
				status = 2
			}
		case lincheck.VerdictEmpty:
			if required[r.Model] {
				fmt.Fprintf(stdout, "  required, but the history has no %s operation\n", r.Model)
				if status == 0 {
					status = 2
				}
			}
		}
	}
	return status
}

func isPrimitive(name string) bool {
	for _, p := range lincheck.Primitives {
		if p == name {
			return true
		}
	}
	return false
}

// reportKnown prints, for each model illegal as recorded but not once the known finding's answers
// are excused, that the known finding was seen, with the sub-history that shows it: reported
// apart, not failed on (the verdicts that decide the exit status are the excused check's).
func reportKnown(stdout io.Writer, known string, asRecorded, excused []lincheck.Result) {
	for _, r := range asRecorded {
		if r.Verdict != lincheck.VerdictIllegal {
			continue
		}
		for _, e := range excused {
			if e.Model == r.Model && e.Verdict != lincheck.VerdictIllegal {
				fmt.Fprintf(stdout, "known      %s: %s is illegal as recorded, %s without it: the known finding, seen\n",
					known, r.Model, e.Verdict)
				for _, explanation := range r.Explanations {
					fmt.Fprintf(stdout, "%s\n", explanation)
				}
			}
		}
	}
}
