//! The counters of named keys in Redis (`store.url = "redis://…"`), shared by replicas.
//! Each admission and each spend is one Lua script, so concurrent replicas never both take
//! the last place; the time is Redis's own (`TIME`), so replicas' clocks do not matter.
//!
//! Keys, under `toolshim:lim:{KEY}:`: `req` (a sorted set of the last minute's requests),
//! `tpm:MINUTE` and `tpd:DAY` (token counts that expire after their window), `run` (a sorted
//! set of the leases in flight, scored by when each expires).

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::counters::{Counters, LEASE, Limits, Refusal, Window};
use super::redis::Conn;
use super::{StoreError, Stored};

/// Checks every limit, then counts the request: `ARGV` = rpm, tpm, tpd, concurrent, lease,
/// lease ms. Returns `{limit, wait_ms}`, `limit` empty when admitted.
const ADMIT: &str = r"
redis.replicate_commands()
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local p = KEYS[1]
local rpm, tpm, tpd, conc = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
if conc > 0 then
  redis.call('ZREMRANGEBYSCORE', p .. 'run', '-inf', now)
  if redis.call('ZCARD', p .. 'run') >= conc then return {'concurrent', 1000} end
end
if tpd > 0 and tonumber(redis.call('GET', p .. 'tpd:' .. math.floor(now / 86400000)) or '0') >= tpd then
  return {'tpd', 86400000 - now % 86400000}
end
if tpm > 0 and tonumber(redis.call('GET', p .. 'tpm:' .. math.floor(now / 60000)) or '0') >= tpm then
  return {'tpm', 60000 - now % 60000}
end
if rpm > 0 then
  redis.call('ZREMRANGEBYSCORE', p .. 'req', '-inf', now - 60000)
  if redis.call('ZCARD', p .. 'req') >= rpm then
    local oldest = redis.call('ZRANGE', p .. 'req', 0, 0, 'WITHSCORES')
    return {'rpm', math.max(0, tonumber(oldest[2]) + 60000 - now)}
  end
  redis.call('ZADD', p .. 'req', now, ARGV[5])
  redis.call('PEXPIRE', p .. 'req', 60000)
end
if conc > 0 then
  redis.call('ZADD', p .. 'run', now + tonumber(ARGV[6]), ARGV[5])
  redis.call('PEXPIRE', p .. 'run', tonumber(ARGV[6]))
end
return {'', 0}
";

/// Adds `ARGV[1]` tokens to the minute's and the day's counts.
const SPEND: &str = r"
redis.replicate_commands()
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local m = KEYS[1] .. 'tpm:' .. math.floor(now / 60000)
local d = KEYS[1] .. 'tpd:' .. math.floor(now / 86400000)
redis.call('INCRBY', m, ARGV[1])
redis.call('PEXPIRE', m, 120000)
redis.call('INCRBY', d, ARGV[1])
redis.call('PEXPIRE', d, 172800000)
return 0
";

/// `{requests in the last minute, tokens this minute, tokens today, in flight}`.
const WINDOW: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local p = KEYS[1]
return {
  redis.call('ZCOUNT', p .. 'req', now - 60000, '+inf'),
  tonumber(redis.call('GET', p .. 'tpm:' .. math.floor(now / 60000)) or '0'),
  tonumber(redis.call('GET', p .. 'tpd:' .. math.floor(now / 86400000)) or '0'),
  redis.call('ZCOUNT', p .. 'run', now, '+inf'),
}
";

pub(super) struct RedisCounters {
    conn: Conn,
    shown: String,
    /// After a failure, Redis is not asked again until then: limits pass at once meanwhile
    /// (failing open without a wait on every request).
    resting: Mutex<Option<Instant>>,
}

/// How long the counters rest after Redis failed.
const REST: Duration = Duration::from_secs(5);

/// A key's prefix; its name in braces, so that a Redis Cluster keeps its counts in one slot.
fn prefix(key: &str) -> String {
    format!("toolshim:lim:{{{key}}}:")
}

/// `EVAL script 1 prefix(key)`, its arguments to follow. (The script is sent each time: a
/// few hundred bytes, and no cache to miss after a Redis restart.)
fn eval(script: &str, key: &str) -> redis::Cmd {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(script).arg(1).arg(prefix(key));
    cmd
}

impl RedisCounters {
    pub(super) fn open(url: &str) -> Stored<RedisCounters> {
        let shown = super::redis::shown(url)?;
        Ok(RedisCounters { conn: Conn::open(url)?, shown, resting: Mutex::new(None) })
    }

    fn with<T>(
        &self,
        f: impl FnOnce(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Stored<T> {
        let mut resting = self.resting.lock().unwrap_or_else(PoisonError::into_inner);
        if resting.is_some_and(|until| Instant::now() < until) {
            return Err(StoreError("redis failed moments ago; not asked again yet".into()));
        }
        let result = self.conn.with(f);
        *resting = result.is_err().then(|| Instant::now() + REST);
        result
    }
}

impl Counters for RedisCounters {
    fn admit(&self, key: &str, limits: &Limits, lease: &str) -> Stored<Result<(), Refusal>> {
        let mut call = eval(ADMIT, key);
        call.arg(limits.rpm).arg(limits.tpm).arg(limits.tpd).arg(limits.concurrent);
        call.arg(lease).arg(LEASE.as_millis() as u64);
        let (limit, wait_ms): (String, u64) = self.with(|c| call.query(c))?;
        let limit = match limit.as_str() {
            "" => return Ok(Ok(())),
            "rpm" => "rpm",
            "tpm" => "tpm",
            "tpd" => "tpd",
            "concurrent" => "concurrent",
            other => return Err(StoreError(format!("the limit script said `{other}`"))),
        };
        Ok(Err(Refusal { limit, wait_ms }))
    }

    fn release(&self, key: &str, lease: &str) -> Stored<()> {
        let run = format!("{}run", prefix(key));
        self.with(|c| redis::cmd("ZREM").arg(run).arg(lease).query::<()>(c))
    }

    fn spend(&self, key: &str, tokens: u64) -> Stored<()> {
        let mut call = eval(SPEND, key);
        call.arg(tokens);
        self.with(|c| call.query::<()>(c))
    }

    fn window(&self, key: &str) -> Stored<Window> {
        let call = eval(WINDOW, key);
        let (requests_last_minute, tokens_this_minute, tokens_today, in_flight): (
            u64,
            u64,
            u64,
            u64,
        ) = self.with(|c| call.query(c))?;
        Ok(Window { requests_last_minute, tokens_this_minute, tokens_today, in_flight })
    }

    fn shown(&self) -> &str {
        &self.shown
    }
}
