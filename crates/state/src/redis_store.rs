//! The Redis store: a pool of blocking connections with timeouts; one Lua script per
//! operation that reads and writes, so each is atomic across replicas.

use crate::config::{RedisConfig, StateConfigError};
use crate::conv::node_arg;
use crate::{
    ApprovalOutcome, ApprovalRecord, ApprovalState, ApprovalStep, ConvRead, ConvRows, ConvWrite,
    Op, Reply, SharedStore, StateError,
};
use redis::{Script, Value};
use std::time::Duration;

const BACKEND: &str = "redis";

/// The bucket of `Op::Bucket`, as `crate::bucket_step` computes it; the state is a hash
/// (`t` tokens, `l` last update ms) whose TTL is the time to refill (a full bucket is the
/// same as none). Tokens are returned as a string: Redis turns Lua numbers into integers.
const BUCKET_LUA: &str = r#"
local cap = tonumber(ARGV[1]); local per_s = tonumber(ARGV[2]); local take = tonumber(ARGV[3])
local need = tonumber(ARGV[4]); local force = ARGV[5] == '1'; local now = tonumber(ARGV[6])
local st = redis.call('HMGET', KEYS[1], 't', 'l')
local tokens = tonumber(st[1]) or cap
local last = tonumber(st[2]) or now
local elapsed = math.max(now - last, 0) / 1000.0
tokens = math.min(tokens + elapsed * per_s, cap)
local allowed = tokens >= need
if allowed or force then tokens = math.max(tokens - take, 0) end
local retry = 0
if (not allowed) and per_s > 0 then retry = math.ceil(math.max(need - tokens, 0) / per_s * 1000) end
local ttl = 86400000
if per_s > 0 then ttl = math.max(math.ceil(math.max(cap - tokens, 0) / per_s * 1000), 1) end
redis.call('HSET', KEYS[1], 't', string.format('%.17g', tokens), 'l', string.format('%d', math.max(now, last)))
redis.call('PEXPIRE', KEYS[1], ttl)
return {allowed and 1 or 0, string.format('%.17g', tokens), retry}
"#;

/// `Op::Approval` on a hash (`rec`, `req`, `state`, `by`, `used`), as
/// `memory::approval_step` does it; the TTL is kept (HSET does not touch it).
const APPROVAL_LUA: &str = r#"
if redis.call('EXISTS', KEYS[1]) == 0 then return {'unknown'} end
local step = ARGV[1]; local by = ARGV[2]
local f = redis.call('HMGET', KEYS[1], 'req', 'state', 'used')
local req, state, used = f[1] or '', f[2] or '', f[3] == '1'
if step == 'approve' or step == 'deny' then
  if by == '' or by == req then return {'self'} end
  if state ~= 'pending' then return {'decided'} end
  local new = 'denied'
  if step == 'approve' then new = 'approved' end
  redis.call('HSET', KEYS[1], 'state', new, 'by', by)
elseif step == 'force_deny' then
  redis.call('HSET', KEYS[1], 'state', 'denied', 'by', by)
else
  if used then return {'used'} end
  if state == 'pending' then return {'pending'} end
  if state ~= 'approved' then return {'denied'} end
  redis.call('HSET', KEYS[1], 'used', '1')
end
local r = redis.call('HMGET', KEYS[1], 'rec', 'req', 'state', 'by', 'used')
return {'done', r[1] or '', r[2] or '', r[3] or '', r[4] or '', r[5] or '0'}
"#;

/// `Op::ApprovalNew`: a pending record unless the key exists.
const APPROVAL_NEW_LUA: &str = r#"
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'rec', ARGV[1], 'req', ARGV[2], 'state', 'pending', 'by', '', 'used', '0')
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"#;

/// `Op::IndexAdd`: drop expired members, add unless `cap` are there (a member already in
/// is updated), and keep the index as long as its last member.
const INDEX_ADD_LUA: &str = r#"
local now = tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local cap = tonumber(ARGV[3])
if redis.call('ZSCORE', KEYS[1], ARGV[1]) == false and redis.call('ZCARD', KEYS[1]) >= cap then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], math.max(tonumber(last[2]), now + 1))
return 1
"#;

/// `Op::IndexLive`: drop expired members, then the earliest `limit`.
const INDEX_LIVE_LUA: &str = r#"
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
return redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1)
"#;

/// `Op::CachePut`: the value with its TTL, the key in the index by expiry, expired
/// members dropped, the earliest-expiring beyond the cap deleted; the index lives as long
/// as its newest member. Evicted members are full key names (the prefix included).
const CACHE_PUT_LUA: &str = r#"
local ttl = tonumber(ARGV[2]); local cap = tonumber(ARGV[3]); local now = tonumber(ARGV[4])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZADD', KEYS[2], now + ttl, KEYS[1])
local over = redis.call('ZCARD', KEYS[2]) - cap
if over > 0 then
  local gone = redis.call('ZPOPMIN', KEYS[2], over)
  for i = 1, #gone, 2 do redis.call('DEL', gone[i]) end
end
redis.call('PEXPIRE', KEYS[2], ttl)
return 1
"#;

/// Opens connections with the configured timeouts (the crate's own `r2d2` manager for
/// `redis::Client` sets none, so a hung Redis would hold a request forever).
#[derive(Debug)]
struct Manager {
    client: redis::Client,
    connect: Duration,
    command: Duration,
}

impl r2d2::ManageConnection for Manager {
    type Connection = redis::Connection;
    type Error = redis::RedisError;

    fn connect(&self) -> Result<redis::Connection, redis::RedisError> {
        let con = self.client.get_connection_with_timeout(self.connect)?;
        con.set_read_timeout(Some(self.command))?;
        con.set_write_timeout(Some(self.command))?;
        Ok(con)
    }

    fn is_valid(&self, con: &mut redis::Connection) -> Result<(), redis::RedisError> {
        redis::cmd("PING").query::<()>(con)
    }

    fn has_broken(&self, con: &mut redis::Connection) -> bool {
        !redis::ConnectionLike::is_open(con)
    }
}

/// The shared state in Redis (6.2 or newer: `GETDEL`). See the crate documentation.
pub struct RedisStore {
    pool: r2d2::Pool<Manager>,
    prefix: String,
    bucket: Script,
    approval: Script,
    approval_new: Script,
    index_add: Script,
    index_live: Script,
    cache_put: Script,
    conv_write: Script,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may hold a password: not printed.
        f.debug_struct("RedisStore")
            .field("prefix", &self.prefix)
            .field("pool", &self.pool.state())
            .finish_non_exhaustive()
    }
}

fn command_error(e: redis::RedisError) -> StateError {
    StateError::Command {
        backend: BACKEND,
        source: Box::new(e),
    }
}

fn protocol(detail: impl Into<String>) -> StateError {
    StateError::Protocol {
        backend: BACKEND,
        detail: detail.into(),
    }
}

impl RedisStore {
    /// A pool for `config`. Connections are opened lazily: a Redis that is down at start
    /// makes the readiness probe fail, not the start.
    pub fn open(config: &RedisConfig) -> Result<Self, StateConfigError> {
        config.validate()?;
        let url = config.resolve_url()?;
        let client = redis::Client::open(url.as_str()).map_err(StateConfigError::Url)?;
        let manager = Manager {
            client,
            connect: Duration::from_millis(config.connect_timeout_ms),
            command: Duration::from_millis(config.command_timeout_ms),
        };
        let pool = r2d2::Pool::builder()
            .max_size(config.pool_size)
            .min_idle(Some(0))
            .connection_timeout(Duration::from_millis(config.connect_timeout_ms))
            .test_on_check_out(false)
            .build_unchecked(manager);
        Ok(Self {
            pool,
            prefix: config.key_prefix.clone(),
            bucket: Script::new(BUCKET_LUA),
            approval: Script::new(APPROVAL_LUA),
            approval_new: Script::new(APPROVAL_NEW_LUA),
            index_add: Script::new(INDEX_ADD_LUA),
            index_live: Script::new(INDEX_LIVE_LUA),
            cache_put: Script::new(CACHE_PUT_LUA),
            conv_write: Script::new(crate::conv::CONV_WRITE_LUA),
        })
    }

    fn key(&self, k: &str) -> String {
        format!("{}{k}", self.prefix)
    }

    fn connection(&self) -> Result<r2d2::PooledConnection<Manager>, StateError> {
        self.pool.get().map_err(|e| StateError::Unavailable {
            backend: BACKEND,
            source: Box::new(e),
        })
    }
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Int(i) => Some(i.to_string()),
        Value::Double(d) => Some(d.to_string()),
        _ => None,
    }
}

fn approval_outcome(v: Vec<Value>) -> Result<ApprovalOutcome, StateError> {
    let code = v.first().and_then(text).unwrap_or_default();
    Ok(match code.as_str() {
        "unknown" => ApprovalOutcome::Unknown,
        "self" => ApprovalOutcome::SelfApproval,
        "decided" => ApprovalOutcome::AlreadyDecided,
        "pending" => ApprovalOutcome::NotApproved,
        "denied" => ApprovalOutcome::Denied,
        "used" => ApprovalOutcome::Used,
        "done" => ApprovalOutcome::Done(record_of(&v[1..])?),
        other => return Err(protocol(format!("approval script answered {other:?}"))),
    })
}

/// A record from `rec, req, state, by, used`.
fn record_of(f: &[Value]) -> Result<ApprovalRecord, StateError> {
    let field = |i: usize| f.get(i).and_then(text).unwrap_or_default();
    let state = ApprovalState::parse(&field(2))
        .ok_or_else(|| protocol(format!("approval state {:?}", field(2))))?;
    Ok(ApprovalRecord {
        record: field(0),
        requested_by: field(1),
        state,
        by: field(3),
        used: field(4) == "1",
    })
}

impl SharedStore for RedisStore {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    fn execute(&self, op: &Op) -> Result<Reply, StateError> {
        let mut con = self.connection()?;
        self.run(&mut con, op)
    }

    fn execute_many(&self, ops: &[Op]) -> Result<Vec<Reply>, StateError> {
        // Buckets (the per-request operations) go in one pipeline: one round trip.
        if ops.len() > 1 && ops.iter().all(|op| matches!(op, Op::Bucket { .. })) {
            let mut con = self.connection()?;
            let mut pipe = redis::pipe();
            for invocation in ops.iter().filter_map(|op| self.bucket_invocation(op)) {
                pipe.invoke_script(&invocation);
            }
            let replies: Vec<(i64, String, i64)> = match pipe.query(&mut *con) {
                Ok(r) => r,
                Err(e)
                    if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
                {
                    // Scripts not loaded yet (a new or restarted Redis): one by one loads them.
                    return ops.iter().map(|op| self.run(&mut con, op)).collect();
                }
                Err(e) => return Err(command_error(e)),
            };
            return replies
                .into_iter()
                .map(|(allowed, tokens, retry)| bucket_reply(allowed, &tokens, retry))
                .collect();
        }
        let mut con = self.connection()?;
        ops.iter().map(|op| self.run(&mut con, op)).collect()
    }
}

fn bucket_reply(allowed: i64, tokens: &str, retry: i64) -> Result<Reply, StateError> {
    Ok(Reply::Bucket {
        allowed: allowed == 1,
        tokens: tokens
            .parse()
            .map_err(|_| protocol(format!("bucket tokens {tokens:?}")))?,
        retry_after_ms: u64::try_from(retry).unwrap_or(0),
    })
}

impl RedisStore {
    /// The bucket script's call for an [`Op::Bucket`] (`None` for any other operation).
    fn bucket_invocation(&self, op: &Op) -> Option<redis::ScriptInvocation<'_>> {
        let Op::Bucket {
            key,
            capacity,
            per_s,
            take,
            need,
            force,
            now_ms,
        } = op
        else {
            return None;
        };
        let mut invocation = self.bucket.prepare_invoke();
        invocation
            .key(self.key(key))
            .arg(capacity.to_string())
            .arg(per_s.to_string())
            .arg(take.to_string())
            .arg(need.to_string())
            .arg(if *force { "1" } else { "0" })
            .arg(*now_ms);
        Some(invocation)
    }

    fn run(&self, con: &mut redis::Connection, op: &Op) -> Result<Reply, StateError> {
        Ok(match op {
            Op::Ping => {
                redis::cmd("PING").query::<()>(con).map_err(command_error)?;
                Reply::Pong
            }
            Op::Bucket { .. } => {
                let (allowed, tokens, retry): (i64, String, i64) = self
                    .bucket_invocation(op)
                    .ok_or_else(|| protocol("not a bucket"))?
                    .invoke(con)
                    .map_err(command_error)?;
                bucket_reply(allowed, &tokens, retry)?
            }
            Op::PutNew { key, value, ttl_ms } => {
                let set: Option<String> = redis::cmd("SET")
                    .arg(self.key(key))
                    .arg(value)
                    .arg("NX")
                    .arg("PX")
                    .arg((*ttl_ms).max(1))
                    .query(con)
                    .map_err(command_error)?;
                Reply::Done(set.is_some())
            }
            Op::Get { key } => Reply::Value(
                redis::cmd("GET")
                    .arg(self.key(key))
                    .query(con)
                    .map_err(command_error)?,
            ),
            Op::Take { key } => Reply::Value(
                redis::cmd("GETDEL")
                    .arg(self.key(key))
                    .query(con)
                    .map_err(command_error)?,
            ),
            Op::ApprovalNew {
                key,
                record,
                requested_by,
                ttl_ms,
            } => {
                let created: i64 = self
                    .approval_new
                    .key(self.key(key))
                    .arg(record)
                    .arg(requested_by)
                    .arg((*ttl_ms).max(1))
                    .invoke(con)
                    .map_err(command_error)?;
                Reply::Done(created == 1)
            }
            Op::ApprovalGet { key } => {
                let f: Vec<Value> = redis::cmd("HMGET")
                    .arg(self.key(key))
                    .arg(&["rec", "req", "state", "by", "used"])
                    .query(con)
                    .map_err(command_error)?;
                if f.first().is_none_or(|v| matches!(v, Value::Nil)) {
                    Reply::Record(None)
                } else {
                    Reply::Record(Some(record_of(&f)?))
                }
            }
            Op::Approval { key, step } => {
                let (name, by) = match step {
                    ApprovalStep::Approve { by } => ("approve", by.as_str()),
                    ApprovalStep::Deny { by } => ("deny", by.as_str()),
                    ApprovalStep::ForceDeny { by } => ("force_deny", by.as_str()),
                    ApprovalStep::Redeem => ("redeem", ""),
                };
                let v: Vec<Value> = self
                    .approval
                    .key(self.key(key))
                    .arg(name)
                    .arg(by)
                    .invoke(con)
                    .map_err(command_error)?;
                Reply::Approval(approval_outcome(v)?)
            }
            Op::IndexAdd {
                index,
                member,
                expires_ms,
                cap,
                now_ms,
            } => {
                let added: i64 = self
                    .index_add
                    .key(self.key(index))
                    .arg(member)
                    .arg(*expires_ms)
                    .arg(*cap)
                    .arg(*now_ms)
                    .invoke(con)
                    .map_err(command_error)?;
                Reply::Done(added == 1)
            }
            Op::IndexRemove { index, member } => {
                let n: i64 = redis::cmd("ZREM")
                    .arg(self.key(index))
                    .arg(member)
                    .query(con)
                    .map_err(command_error)?;
                Reply::Done(n > 0)
            }
            Op::IndexLive {
                index,
                now_ms,
                limit,
            } => Reply::Members(
                self.index_live
                    .key(self.key(index))
                    .arg(*now_ms)
                    .arg((*limit).max(1))
                    .invoke(con)
                    .map_err(command_error)?,
            ),
            Op::CachePut {
                key,
                index,
                value,
                ttl_ms,
                cap,
                now_ms,
            } => {
                let _: i64 = self
                    .cache_put
                    .key(self.key(key))
                    .key(self.key(index))
                    .arg(value)
                    .arg((*ttl_ms).max(1))
                    .arg((*cap).max(1))
                    .arg(*now_ms)
                    .invoke(con)
                    .map_err(command_error)?;
                Reply::Done(true)
            }
            Op::ConvRead(r) => Reply::ConvRows(self.conv_read(con, r)?),
            Op::ConvWrite(w) => {
                self.conv_write(con, w)?;
                Reply::Done(true)
            }
        })
    }

    /// Every row in one pipeline: `HGETALL` per node, `GET` of the hint, `ZMSCORE` of the
    /// ledger entries.
    fn conv_read(&self, con: &mut redis::Connection, r: &ConvRead) -> Result<ConvRows, StateError> {
        let space = self.key(&r.space);
        let mut pipe = redis::pipe();
        for n in &r.nodes {
            pipe.cmd("HGETALL").arg(format!("{space}n:{n}"));
        }
        if let Some(h) = &r.hint {
            pipe.cmd("GET").arg(format!("{space}h:{h}"));
        }
        if !r.ledger.is_empty() {
            pipe.cmd("ZMSCORE")
                .arg(format!("{space}ledger"))
                .arg(&r.ledger);
        }
        if r.nodes.is_empty() && r.hint.is_none() && r.ledger.is_empty() {
            return Ok(ConvRows::default());
        }
        let mut replies: Vec<Value> = pipe.query(con).map_err(command_error)?;
        let mut rest = replies.split_off(r.nodes.len().min(replies.len()));
        if replies.len() != r.nodes.len() {
            return Err(protocol("conversation read: fewer replies than nodes"));
        }
        let nodes = replies
            .into_iter()
            .map(|v| redis::from_redis_value(v).map_err(|e| protocol(e.to_string())))
            .collect::<Result<Vec<std::collections::HashMap<String, String>>, _>>()?;
        let mut rest = rest.drain(..);
        let hint = match &r.hint {
            Some(_) => rest.next().and_then(|v| text(&v)),
            None => None,
        };
        let ledger = if r.ledger.is_empty() {
            Vec::new()
        } else {
            let scores: Vec<Option<f64>> = rest
                .next()
                .map(redis::from_redis_value)
                .transpose()
                .map_err(|e| protocol(e.to_string()))?
                .unwrap_or_default();
            scores
                .into_iter()
                .map(|s| s.filter(|v| v.is_finite() && *v >= 0.0).map(|v| v as u64))
                .collect()
        };
        Ok(ConvRows {
            nodes,
            hint,
            ledger,
        })
    }

    fn conv_write(&self, con: &mut redis::Connection, w: &ConvWrite) -> Result<(), StateError> {
        let mut inv = self.conv_write.prepare_invoke();
        inv.key(self.key(&w.space))
            .arg(w.now)
            .arg(w.ttl_s.max(1))
            .arg(w.quota)
            .arg(w.pin_cap)
            .arg(w.nodes.len())
            .arg(w.hints.len())
            .arg(w.ledger.len())
            .arg(w.ledger_ttl_s.max(1))
            .arg(w.ledger_quota);
        for n in &w.nodes {
            inv.arg(node_arg(n));
        }
        for (h, a) in &w.hints {
            inv.arg(h).arg(a);
        }
        for (e, seen) in &w.ledger {
            inv.arg(e).arg(*seen);
        }
        let _: i64 = inv.invoke(con).map_err(command_error)?;
        Ok(())
    }
}
