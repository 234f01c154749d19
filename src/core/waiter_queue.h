#pragma once

// One key's first-come first-served waiter queue (ADR-0007) as a state machine that returns
// decisions — which waiter to attempt for, whom to answer and with what, whether to attempt
// again — and leaves the acting (store calls, timers, answers) to LockService. Not thread-safe:
// LockService calls it under its mutex, and acts on the decisions after releasing it.

#include <chrono>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/outcome.h"
#include "core/time_source.h"
#include "dlock/lock_store.h"

namespace dlock::core {

using AcquireOutcome = Outcome<std::optional<LockHandle>>;

struct Waiter {
  std::string session_id;
  std::string owner_id;
  // Exclusive, a shared holder, a permit of N or a leader (ADR-0020), with its lease: a TTL, or
  // session-bound (ADR-0018). Waiting is first come, first served across modes: a shared waiter
  // behind a queued exclusive one waits (writers do not starve). A leader is never handed over (a
  // handover's grant has no value): its own try_grant grants it.
  GrantRequest request = GrantRequest::exclusive(std::chrono::milliseconds(0));
  std::function<void(AcquireOutcome)> done;
  // When it joined the queue (GET /v1/locks/{key} reports how long it has waited).
  SteadyClock::time_point queued_at{};  // by the service's TimeSource
  TimerPtr deadline;
  bool finished = false;  // guarded by the service's mutex: a waiter is answered exactly once
  // Its wait_ms ended while an acquire attempt for it was in flight: that attempt answers it.
  bool expired = false;
  // The server shut down during that attempt (take_all): if the attempt finds the key held, the
  // answer is "unavailable" (server shutting down, C3: 503 and Retry-After), not "held".
  bool shut_down = false;
  // Moved to the front once as its session's holder (WaiterQueue::promote): never again.
  bool promoted = false;
};
using WaiterPtr = std::shared_ptr<Waiter>;

// How a backend attempt for the head waiter (try_grant, or a release's handover) ended.
enum class Attempt {
  kGranted,    // the head was granted the key
  kRefused,    // the head's session is gone: it is answered, never granted
  kHeld,       // the key is held: the head keeps its place
  kFailed,     // the backend failed: no decision, the head keeps its place
  kUndecided,  // a hand-over the releaser could not make (not its live exclusive grant): nothing
               // was decided for the head, which keeps its place; a head whose wait_ms ended
               // meanwhile is answered by the next attempt, which the caller starts (pump)
};

class WaiterQueue {
 public:
  // What the service must do once an attempt has ended.
  struct AfterAttempt {
    // The head was still pending and is now out of the queue: deliver the grant or refusal to
    // it. False for a granted head that had already given up: the grant is an orphan.
    bool deliver = false;
    // A wake-up arrived while the attempt was in flight: attempt once more.
    bool again = false;
    // Waiters are left (after a held attempt: arm the wake-up at the holder's expiry).
    bool waiting = false;
    // The head's wait_ms ended during this attempt, which decided nothing for it (held or
    // failed): it is now out of the queue, to be answered "held" or with `failure` (the
    // attempt's failure, or "server is shutting down" when the shutdown ended its wait).
    bool expired = false;
    std::exception_ptr failure;
  };

  // Appends a waiter; true when it is now the head.
  bool push(WaiterPtr waiter);
  // Starts an attempt for the head unless one is in flight (then one more is noted, `again`)
  // or nobody waits. Returns the head to attempt for, or null.
  WaiterPtr begin_attempt();
  // Starts a release's hand-over to the head: the head, or null when an attempt is in flight,
  // nobody waits or the head wants a shared hold, a permit or leadership (then the release is a
  // plain delete, and its release notification pumps the queue). A hand-over is an attempt for
  // the head: its wait_ms ending meanwhile leaves the answer to it (give_up).
  WaiterPtr begin_handover();
  // Ends the attempt begun for `head`. A granted or refused head leaves the queue here, before
  // the queue stops being busy: otherwise another attempt could find the same head still
  // queued and grant it again, leaving it with a superseded token.
  AfterAttempt end_attempt(const WaiterPtr& head, Attempt attempt, std::exception_ptr failure);

  // Takes a still-pending waiter out (it is being answered); false if already answered.
  bool take(const WaiterPtr& waiter);
  // A waiter's wait_ms ended. Nothing if it was already answered; otherwise it is taken out and
  // is to be answered with the last attempt's failure when that attempt failed — no backend
  // decision was made (lock_store.h: a failure is never "held") — or "held" (null).
  // Except the head while an acquire attempt for it is in flight: that attempt decides, and
  // end_attempt answers it (ADR-0007 "Deadlines"). Answered "held" now, the client could ask
  // again and be granted elsewhere, and the attempt landing after that grant would supersede it
  // as a re-entrant acquire of its own session.
  std::optional<std::exception_ptr> give_up(const WaiterPtr& waiter);
  // Its client has gone: taken out at once, even during its attempt (whose grant is then given
  // back). Answered as give_up's, unless already answered.
  std::optional<std::exception_ptr> cancel(const WaiterPtr& waiter);
  // Takes out every pending waiter of these sessions. A head whose attempt is in flight is
  // taken too: that attempt then finds it answered and gives back whatever it was granted.
  std::vector<WaiterPtr> take_sessions(const std::set<std::string, std::less<>>& session_ids);
  // The same for every pending waiter `chosen` picks.
  std::vector<WaiterPtr> take_if(const std::function<bool(const Waiter&)>& chosen);
  // Takes out every pending waiter (shutdown), except the head while an acquire attempt for it
  // is in flight: as at its wait_ms (give_up), that attempt answers it, so that a client told
  // "unavailable" and asking another server is not overtaken by the attempt landing later. That
  // answer is the grant, the refusal, the failure, or — the key held — "unavailable" as for the
  // others.
  std::vector<WaiterPtr> take_all();

  // Moves the first pending exclusive waiter of `session_id` to the front, behind the head whose
  // attempt is in flight if there is one: that session holds the key, and its acquire is
  // re-entrant, not a wait for its own lock. Once per waiter, so a store that refuses it anyway
  // cannot make the queue spin. True when such a waiter is now first in line (the caller pumps).
  bool promote(std::string_view session_id);

  bool empty() const { return waiters_.empty(); }
  // An attempt or a hand-over for the head is in flight.
  bool attempting() const { return busy_; }
  // Nobody waits and no attempt is in flight: the queue can be dropped.
  bool idle() const { return !busy_ && waiters_.empty(); }
  std::vector<std::string> waiting_sessions() const;
  // The waiters in queue order, the head first.
  std::vector<WaiterPtr> waiters() const { return {waiters_.begin(), waiters_.end()}; }

 private:
  std::deque<WaiterPtr> waiters_;
  bool busy_ = false;     // an attempt for the head is in flight
  WaiterPtr attempting_;  // the head an acquire attempt is in flight for (not a hand-over)
  bool again_ = false;    // a wake-up arrived while busy
  // The failure of the last attempt, cleared by an attempt that decided (granted, refused or
  // held).
  std::exception_ptr last_failure_;
};

}  // namespace dlock::core
