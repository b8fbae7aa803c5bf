//! Per-key counters behind the limits of named keys (issue 27; docs/operations.md): the
//! requests of the last 60 seconds (a log, so that no rolling minute passes `rpm`), the tokens
//! of the clock minute and of the UTC day, and the requests in flight (leases that expire, so
//! that a replica that dies does not hold them). In this process, or in Redis when the store
//! is one, so that a limit holds across replicas: each admission is one script, atomic there.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::Stored;

/// A key's limits; 0 is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Limits {
    pub(crate) rpm: u64,
    pub(crate) tpm: u64,
    pub(crate) tpd: u64,
    pub(crate) concurrent: u64,
}

impl Limits {
    pub(crate) fn any(&self) -> bool {
        [self.rpm, self.tpm, self.tpd, self.concurrent].iter().any(|&n| n > 0)
    }
}

/// The limit that refused a request, and the milliseconds until it may pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// `rpm`, `tpm`, `tpd` or `concurrent`.
    pub(crate) limit: &'static str,
    pub(crate) wait_ms: u64,
}

/// A key's counts now (for the admin endpoint).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Window {
    pub(crate) requests_last_minute: u64,
    pub(crate) tokens_this_minute: u64,
    pub(crate) tokens_today: u64,
    pub(crate) in_flight: u64,
}

/// How long a request in flight counts at most (a lease a dead replica leaves expires).
pub(crate) const LEASE: Duration = Duration::from_secs(15 * 60);

/// Where the counts live.
pub(crate) trait Counters: Send + Sync {
    /// Admits one request of `key` (`lease` names it, unique) if no limit stops it, and
    /// counts it; else the limit that does.
    fn admit(&self, key: &str, limits: &Limits, lease: &str) -> Stored<Result<(), Refusal>>;
    /// The request `lease` of `key` ended.
    fn release(&self, key: &str, lease: &str) -> Stored<()>;
    /// `tokens` spent by `key`.
    fn spend(&self, key: &str, tokens: u64) -> Stored<()>;
    /// The counts of `key` now.
    fn window(&self, key: &str) -> Stored<Window>;
    /// Where they live, for logs and the admin endpoint (`local` or a Redis URL).
    fn shown(&self) -> &str;
}

/// The counters for `url` (the store's): Redis's when it is one, else this process's.
pub(crate) fn open(url: &str) -> Stored<Box<dyn Counters>> {
    let url = url.trim();
    if url.starts_with("redis://") || url.starts_with("rediss://") {
        return Ok(Box::new(super::redis_counters::RedisCounters::open(url)?));
    }
    Ok(Box::new(Local::default()))
}

pub(super) fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

const MINUTE_MS: u64 = 60_000;
const DAY_MS: u64 = 86_400_000;

/// One key's counts in this process.
#[derive(Default)]
struct Counts {
    /// When each request of the last minute was admitted, oldest first.
    requests: VecDeque<u64>,
    /// The minute (since the epoch) and its tokens.
    minute: (u64, u64),
    /// The day and its tokens.
    day: (u64, u64),
    /// The leases in flight and when each expires.
    in_flight: HashMap<String, u64>,
}

impl Counts {
    fn tidy(&mut self, now: u64) {
        while self.requests.front().is_some_and(|at| *at + MINUTE_MS <= now) {
            self.requests.pop_front();
        }
        if self.minute.0 != now / MINUTE_MS {
            self.minute = (now / MINUTE_MS, 0);
        }
        if self.day.0 != now / DAY_MS {
            self.day = (now / DAY_MS, 0);
        }
        self.in_flight.retain(|_, until| *until > now);
    }
}

/// The counters of this process.
#[derive(Default)]
pub(crate) struct Local {
    keys: Mutex<HashMap<String, Counts>>,
}

impl Local {
    fn with<T>(&self, key: &str, f: impl FnOnce(&mut Counts, u64) -> T) -> T {
        let now = now_ms();
        let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        let counts = keys.entry(key.to_owned()).or_default();
        counts.tidy(now);
        f(counts, now)
    }
}

impl Counters for Local {
    fn admit(&self, key: &str, limits: &Limits, lease: &str) -> Stored<Result<(), Refusal>> {
        Ok(self.with(key, |counts, now| {
            let refusal = |limit, wait_ms| Err(Refusal { limit, wait_ms });
            if limits.concurrent > 0 && counts.in_flight.len() as u64 >= limits.concurrent {
                return refusal("concurrent", 1000);
            }
            if limits.tpd > 0 && counts.day.1 >= limits.tpd {
                return refusal("tpd", DAY_MS - now % DAY_MS);
            }
            if limits.tpm > 0 && counts.minute.1 >= limits.tpm {
                return refusal("tpm", MINUTE_MS - now % MINUTE_MS);
            }
            if limits.rpm > 0 {
                if counts.requests.len() as u64 >= limits.rpm {
                    let oldest = counts.requests.front().copied().unwrap_or(now);
                    return refusal("rpm", (oldest + MINUTE_MS).saturating_sub(now));
                }
                counts.requests.push_back(now);
            }
            if limits.concurrent > 0 {
                counts.in_flight.insert(lease.to_owned(), now + LEASE.as_millis() as u64);
            }
            Ok(())
        }))
    }

    fn release(&self, key: &str, lease: &str) -> Stored<()> {
        self.with(key, |counts, _| counts.in_flight.remove(lease));
        Ok(())
    }

    fn spend(&self, key: &str, tokens: u64) -> Stored<()> {
        self.with(key, |counts, _| {
            counts.minute.1 += tokens;
            counts.day.1 += tokens;
        });
        Ok(())
    }

    fn window(&self, key: &str) -> Stored<Window> {
        Ok(self.with(key, |counts, _| Window {
            requests_last_minute: counts.requests.len() as u64,
            tokens_this_minute: counts.minute.1,
            tokens_today: counts.day.1,
            in_flight: counts.in_flight.len() as u64,
        }))
    }

    fn shown(&self) -> &str {
        "local"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rpm_holds_over_a_rolling_minute_and_says_when_the_oldest_leaves() {
        let local = Local::default();
        let limits = Limits { rpm: 3, ..Limits::default() };
        for i in 0..3 {
            assert_eq!(local.admit("k", &limits, &format!("l{i}")).unwrap(), Ok(()));
        }
        let refused = local.admit("k", &limits, "l3").unwrap().unwrap_err();
        assert_eq!(refused.limit, "rpm");
        assert!(refused.wait_ms > 59_000 && refused.wait_ms <= 60_000, "{refused:?}");
        // Another key has its own.
        assert_eq!(local.admit("other", &limits, "l0").unwrap(), Ok(()));
        assert_eq!(local.window("k").unwrap().requests_last_minute, 3);
    }

    #[test]
    fn tokens_and_requests_in_flight_are_limited() {
        let local = Local::default();
        let limits = Limits { tpm: 100, concurrent: 1, ..Limits::default() };
        assert_eq!(local.admit("k", &limits, "a").unwrap(), Ok(()));
        assert_eq!(local.admit("k", &limits, "b").unwrap().unwrap_err().limit, "concurrent");
        local.release("k", "a").unwrap();
        local.spend("k", 100).unwrap();
        assert_eq!(local.admit("k", &limits, "c").unwrap().unwrap_err().limit, "tpm");
        let window = local.window("k").unwrap();
        assert_eq!(
            (window.tokens_this_minute, window.tokens_today, window.in_flight),
            (100, 100, 0)
        );
    }
}
