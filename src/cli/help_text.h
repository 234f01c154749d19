#pragma once

// Man-style text for `dlock --help` and `dlock SUBCOMMAND --help`: what each command does, its
// exit statuses and an example, so the help is enough to use the tool.

namespace dlock::cli::help {

inline constexpr const char* kMain = R"(dlock - command-line client of the dlockd lock service

dlock talks to dlockd over HTTP or HTTPS (contracts C3, C6). Locks belong to sessions; every grant carries a
fencing token, strictly greater than every token issued before for the key: stamp your writes
with it and have the resource reject smaller ones.)";

inline constexpr const char* kMainFooter = R"(ENVIRONMENT
  DLOCK_SERVER       server URL(s) when --server is not given (default http://127.0.0.1:7070);
                     a comma-separated list names several dlockd on one backend: a call moves
                     to the next when one cannot be reached or answers 503
  DLOCK_TOKEN        bearer token when --token/--token-file are not given (never printed)
  DLOCK_TOKEN_FILE   file whose first line is the bearer token, when DLOCK_TOKEN is not set
  DLOCK_CACERT       CA certificates (PEM) for https:// servers (default: the system's)
  DLOCK_CERT         client certificate (PEM) for servers that require one (mTLS)
  DLOCK_KEY          its key (default: in the DLOCK_CERT file)
  DLOCK_CLOCK_DRIFT  clock-rate allowance when --clock-drift is not given (default 1%)
  DLOCK_ADMIN_TOKEN  admin token for revoke when --admin-token is not given (default: the token)
  DLOCK_OWNER        owner name when --owner is not given (default USER@hostname)
  DLOCK_NAMESPACE    namespace when --ns is not given (dlock run exports it to CMD)

UNREACHABLE SERVER
  A failed call is reported at once and retried (1s, then every 2s) until --timeout: on a
  terminal as one line with a countdown, otherwise one line per failure. --wait does not
  extend --timeout. While a held key is waited for, a terminal shows who holds it.

COMPLETION
  source <(dlock completion bash)     (also zsh, fish)

EXIT STATUS
  0   success
  1   other error (e.g. session not found, unexpected server answer)
  64  usage error (bad flag, argument or duration)
  67  not authenticated: no bearer token, or one the server does not know (401)
  69  server or backend unavailable (after retrying every server until --timeout)
  75  lock not acquired: held by someone else after --wait
  76  lock lost (extend/release refused; for run: CMD's process group was stopped)
  77  permission denied: the token may not do this in this namespace (403)
  78  TLS failed: the server's certificate did not verify, or it refused ours
  79  server at a limit or throttling this client (429, after retrying)
  run and elect exit with CMD's status (128+N when CMD was killed by signal N).

OUTPUT
  Text: control characters in keys, owners, values and messages (ESC, \r, C1) are shown as
  escapes (\x1b, \x0d, \u009b; a backslash as \\), on a terminal or not. --json: exact values.

DURATIONS
  An integer and a unit: 500ms, 30s, 5m, 1h.

EXAMPLES
  dlock run payouts/batch-17 --ttl 30s --wait 1m -- ./pay.sh
  DLOCK_TOKEN_FILE=~/.dlock-token dlock --server https://locks:7443 get payouts/batch-17 --json
  dlock list --prefix payouts/
  dlock elect payouts-primary --value "$HOSTNAME" -- ./serve.sh
  dlock leader payouts-primary --watch)";

inline constexpr const char* kSession =
    "Open, keep alive, show or close a session (a liveness lease)";
inline constexpr const char* kSessionFooter = R"(DESCRIPTION
  Locks belong to a session. A session expires unless kept alive within its TTL; closing or
  expiring a session releases all of its locks. `dlock run` manages its own session; these
  subcommands are for scripts that hold locks across several dlock calls.

  --lock-delay D (session open, run, elect): when a grant of the session ends without a
  release (the session expired, an admin revoked it), dlockd grants the key to nobody for D,
  so a holder that went on writing after its lease silently ended is done before the next one
  starts. For a resource that cannot check fencing tokens: longer than the worst pause plus the
  longest write. 0 (default) when it checks tokens. A release or close costs no delay.

EXAMPLE
  sid=$(dlock session open --ttl 1m --json | jq -r .session_id)
  dlock acquire jobs/nightly --session "$sid"
  dlock session keepalive "$sid"
  dlock session show "$sid"     # what it holds, in every namespace, and waits for
  dlock session close "$sid")";

inline constexpr const char* kAcquire = "Acquire a lock for an existing session";
inline constexpr const char* kAcquireFooter = R"(DESCRIPTION
  Asks for KEY on behalf of --session, waiting up to --wait while another owner holds it
  (waiters are served first-come first-served). Prints the fencing token. Acquiring a key the
  session already holds succeeds again with a greater token. The lock is not extended: use
  `dlock extend` before its TTL passes, or `dlock run`.

  --shared asks for a read lock: any number of sessions hold KEY shared at once, none while an
  exclusive (write) lock lives, and a writer waits for every reader. --semaphore N asks for one
  of N permits of the semaphore KEY: N holders at most, and every holder must give the same N
  (another is refused, exit 1, error conflict on field limit). Each reader and each permit
  gets a fencing token of its own. Extend and release a read lock or a permit like a lock.

EXIT STATUS
  0 granted, 75 still held (every permit taken) after --wait, 69 server unavailable, 1 session
  not found.

EXAMPLE
  dlock acquire reports/daily --session "$sid" --ttl 2m --wait 10s
  dlock acquire reports/daily --session "$sid" --shared
  dlock acquire gpu-pool --session "$sid" --semaphore 4 --wait 1m)";

inline constexpr const char* kExtend = "Extend a lock you hold (same fencing token)";
inline constexpr const char* kExtendFooter = R"(DESCRIPTION
  Renews the lease of the grant (--session, --fencing-token) on KEY for --ttl (default: the
  server's). The token never changes. Exits 76 when the grant is gone (expired, revoked,
  re-granted). After extend, --token is the fencing token (the older spelling); give a bearer
  token before the subcommand or in DLOCK_TOKEN.

EXAMPLE
  dlock extend reports/daily --session "$sid" --fencing-token 42 --ttl 2m)";

inline constexpr const char* kRelease = "Release a lock you hold";
inline constexpr const char* kReleaseFooter = R"(DESCRIPTION
  Releases the grant (--session, --fencing-token) on KEY; waiters are granted next. Exits 76
  when that grant was no longer the current one (nothing was released). After release, --token
  is the fencing token (the older spelling).

EXAMPLE
  dlock release reports/daily --session "$sid" --fencing-token 42)";

inline constexpr const char* kGet = "Show who holds a lock";
inline constexpr const char* kGetFooter = R"(DESCRIPTION
  Prints the current grant of KEY (mode, token, owner, session, times) or that it is free. The
  mode is exclusive (a lock, a writer), shared (readers) or permit (a semaphore's holders).
  With several holders the one with the greatest token is shown first, then every holder with
  its own token. With --json the document has "held": true|false, "mode" and "holders" (every
  holder). Exits 0 either way.)";

inline constexpr const char* kSemaphore = "Show a semaphore's limit and holders";
inline constexpr const char* kSemaphoreFooter = R"(DESCRIPTION
  Prints how many of the semaphore NAME's permits are held, of how many (the limit its live
  holders agreed on), and every holder with its fencing token. A semaphore none of whose
  permits is held has no limit until the next acquire sets one. With --json: {"name", "limit"
  (absent when no permit is held), "holders"}. Exits 0 either way.

EXAMPLE
  dlock semaphore gpu-pool)";

inline constexpr const char* kList = "List held locks";
inline constexpr const char* kListFooter = R"(DESCRIPTION
  Lists the live grants in the namespace whose key starts with --prefix, at most --limit
  (default 100; above 1000 the CLI follows the server's pages), or every one with --all, in
  aligned columns KEY MODE FENCING_TOKEN OWNER SESSION WAITERS AGE EXPIRES_AT (WAITERS: the
  acquires waiting on the dlockd that answered; AGE: since the grant). -A lists every namespace
  (an administrator of every one), with a NAMESPACE column first. When there were more, a last
  line says so ("showing the first 100; more are held"; --json: "truncated": true). Scripts:
  use --json.)";

inline constexpr const char* kSessions = "List live sessions";
inline constexpr const char* kSessionsFooter = R"(DESCRIPTION
  Lists the live sessions you may see (C6: your own; every one for an administrator of every
  namespace or without authentication), by ID, in aligned columns SESSION OWNER PRINCIPAL TTL
  LOCK_DELAY EXPIRES_AT, at most --limit (default 100), or every one with --all. --owner keeps
  owners starting with it (an administrator names --principal with it). When there were more,
  a last line says so (--json: "truncated": true).)";

inline constexpr const char* kRevoke = "Force-release a lock (admin)";
inline constexpr const char* kRevokeFooter = R"(DESCRIPTION
  Removes the current grant of KEY whoever holds it. The holder learns at its next extend
  (lock_lost); `dlock run` then stops its CMD's whole process group. Needs the server's
  admin token (--admin-token or DLOCK_ADMIN_TOKEN) or a bearer token with admin on the
  namespace; exits 67 when the server does not know it, 77 when it is not allowed.

EXAMPLE
  DLOCK_ADMIN_TOKEN=s3cret dlock revoke payouts/batch-17)";

inline constexpr const char* kRun = "Run a command while holding a lock";
inline constexpr const char* kRunFooter = R"(DESCRIPTION
  Opens a session, acquires KEY (waiting up to --wait), then runs CMD with
    DLOCK_KEY            the key
    DLOCK_FENCING_TOKEN  the grant's fencing token: pass it along with every write
    DLOCK_SESSION_ID     the session
    DLOCK_NAMESPACE      the namespace
    DLOCK_LOCK_MODE      exclusive, shared (--shared) or permit (--semaphore N)
  in its environment, as the leader of a process group of its own: dlock signals the whole
  group (CMD, `sleep &`, pipelines...), never one pid. While CMD runs, dlock keeps the session
  alive (a keepalive every TTL/3). SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to dlock are
  forwarded to the group. When CMD exits, dlock stops what it left running in its group,
  releases the lock once nothing of the group is left, and exits with CMD's status.

LEASE
  --lease session (default): the lock lives exactly as long as dlock's session; the session's
  keepalives keep it, and it ends when the session expires. Fewer backend writes per run (on
  etcd no lease of its own). dlock still checks the grant every TTL/3 (a no-op extend that
  writes nothing) to notice a revoke. --lease ttl: the lock has a TTL of its own (--ttl, also
  the session's) and dlock extends it every TTL/3, as before ADR-0018 (for a dlockd that
  predates session-bound locks). Both are equally safe here: a dlock that dies or loses its server leaves
  the lock held for at most --ttl, and CMD is stopped by the timeline below.
  --lock-delay D keeps KEY ungranted for D more after a lock that ended without a release
  (expired, revoked): for a resource that cannot check DLOCK_FENCING_TOKEN (`dlock session
  --help`). A run that exits and releases costs no delay.

READ LOCKS AND SEMAPHORES
  --shared holds KEY as a reader: runs with --shared overlap, an exclusive run (a writer) waits
  until every reader is gone and readers that come after a waiting writer wait for it (per
  dlockd). --semaphore N holds one of N permits of KEY: at most N runs at once, each giving the
  same N. Each reader and each permit has a fencing token of its own, and a writer's token is
  greater than every reader's before it. Lease, keepalives and the stop timeline are the same.

STOP TIMELINE
  D is the lock's deadline: send time of the last successful acquire/extend (session-bound:
  of the session's last successful open/keepalive) + TTL. M is --stop-margin (default
  max(1s, TTL/10), at most TTL/3; must be < TTL/2), G is --kill-grace (default M/2).
    D - M                    no extend (keepalive) succeeded in time: SIGTERM to CMD's group
    min(D - M + G, D - M/2)  SIGKILL to the group
    D                        the deadline; SIGKILL went out at least M/2 before
  A lock lost outright (revoked, lock_lost, session gone; noticed at the next extend, check or
  keepalive) is stopped at once: SIGTERM now, SIGKILL after G, at the latest at D - M/2. Either way dlock
  waits until the group is gone and exits 76. A 30s lock: SIGTERM 3s and SIGKILL 1.5s before D.
  Processes that leave the group (setsid, daemons) escape. In the foreground of a terminal,
  the terminal goes to CMD's group; Ctrl-Z does not suspend a lock holder (it is continued).
  CMD stopped otherwise (kill -STOP, SIGTTIN/SIGTTOU) for one TTL: its group is stopped, the
  lock released, exit 76.

EXIT STATUS
  CMD's status (128+N if CMD was killed by signal N); 75 KEY still held after --wait; 76 lock
  lost, or not extended (session not kept alive) by D - M, while CMD ran (its group was
  stopped), or found lost at the release, or CMD stayed stopped for a TTL; 69 server
  unavailable; 64 usage error; 127 CMD not found; 126 CMD not executable.

EXAMPLE
  dlock run payouts/batch-17 --ttl 30s --wait 5m -- \
      sh -c 'pay --batch 17 --fencing-token "$DLOCK_FENCING_TOKEN"'
  dlock run reports/daily --shared --wait 1m -- ./read-report.sh
  dlock run gpu-pool --semaphore 4 --wait 10m -- ./train.sh)";

inline constexpr const char* kElect = "Run a command while leader of an election";
inline constexpr const char* kElectFooter = R"(DESCRIPTION
  Opens a session, campaigns for the election NAME with --value (waiting up to --wait, default
  0: try once, as run), then runs CMD while this session leads, with the environment of
  `dlock run` (DLOCK_KEY is NAME, DLOCK_FENCING_TOKEN the leadership's token, DLOCK_SESSION_ID,
  DLOCK_NAMESPACE, DLOCK_LOCK_MODE=exclusive) and
    DLOCK_LEADER_VALUE   the value this leader proclaims (--value)
  A leader is session-bound: it lives exactly as long as dlock's session, kept by its
  keepalives (every TTL/3); dlock also reads the election every TTL/3 to notice a lost
  leadership. CMD is supervised and stopped exactly as by `dlock run` (process group, signal
  forwarding, the STOP TIMELINE of `dlock run --help` with the session's deadline). When CMD
  exits dlock resigns, and the next campaigner leads with a greater token.

  Elections share the key space of locks: a name held as a lock, by readers or permits has no
  leader, and a campaign waits for it like an exclusive acquire. `dlock leader NAME` shows the
  leader; `dlock get NAME` shows it as an exclusive lock.

EXIT STATUS
  As `dlock run`: CMD's status (128+N if killed by signal N); 75 another session still leads
  after --wait (CMD did not run); 76 the leadership was lost while CMD ran (its group was
  stopped); 69 server unavailable; 64 usage error; 127 CMD not found; 126 CMD not executable.

EXAMPLE
  dlock elect payouts-primary --value "$(hostname):8443" --wait 10m -- \
      sh -c 'serve --fencing-token "$DLOCK_FENCING_TOKEN" --advertise "$DLOCK_LEADER_VALUE"')";

inline constexpr const char* kLeader = "Show or watch an election's leader";
inline constexpr const char* kLeaderFooter = R"(DESCRIPTION
  Prints the leader of the election NAME: owner, value and fencing token, or "no leader" (nobody
  leads, or NAME is held as a lock, by readers or permits). With --json: {"name", "leader":
  {"owner", "value"} or null, "fencing_token", "acquired_at", "expires_at", "session_id"?}.

  --watch prints the current leader, then one line (one JSON document with --json) per change:
  a new leader, a new value proclaimed by the same leader, nobody leading. It waits on the
  server (a long poll of up to 60s, repeated) instead of polling, and runs until SIGINT or
  SIGTERM, which end it with status 0.

EXIT STATUS
  0 printed (a leader or none, as `dlock get` exits 0 for a free key), 69 server unavailable,
  64 usage error.

EXAMPLE
  dlock leader payouts-primary
  dlock leader payouts-primary --watch --json)";

inline constexpr const char* kToken = "Make bearer tokens for dlockd's tokens file";
inline constexpr const char* kTokenFooter = R"(DESCRIPTION
  `dlock token new PRINCIPAL PERMISSIONS` prints a fresh random token (256 bits from the
  CSPRNG, starting dlk_) and the line to add to dlockd's tokens file (auth.tokens.file). The
  token is SECRET: give it only to PRINCIPAL (DLOCK_TOKEN). The line holds only its SHA-256 and
  is not secret: add it to the tokens file of every dlockd sharing the backend, then send each
  one SIGHUP. Nothing is sent to a server. PERMISSIONS is <role>:<pattern>[,...] with role
  read, lock (implies read) or admin (implies both, allows revoke) and pattern a namespace,
  prefix* or *. With --json: {"principal", "permissions", "token", "sha256",
  "tokens_file_line"}.

EXIT STATUS
  0 printed, 64 bad PRINCIPAL or PERMISSIONS.

EXAMPLE
  dlock token new payments-worker lock:payments,read:*)";

}  // namespace dlock::cli::help
