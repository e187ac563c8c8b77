//! [`OrderLock`] on Redis: `SET key token NX PX ttl`, released by a compare-and-delete script.
//!
//! Acquire is one atomic `SET … NX PX`: it succeeds only if no one holds the key, and the
//! key expires by itself if its owner dies. Release runs a Lua script that deletes the key
//! only if it still holds the owner's token, so an owner whose lock expired cannot delete
//! its successor's. Every call is bounded by a timeout; a broken connection is dropped and
//! re-dialled on the next call. When Redis cannot be reached the call fails with a
//! [`LockError`], and the merchant answers a retryable 503: it never pays unguarded.

use std::time::Duration;

use async_trait::async_trait;
use redis::aio::MultiplexedConnection;
use redis::AsyncConnectionConfig;

use super::lock::{lock_name, LockError, LockLease, LockToken, OrderLock};
use super::order::OrderId;

const RELEASE: &str = r#"
if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("DEL", KEYS[1])
end
return 0
"#;

pub struct RedisLock {
    client: redis::Client,
    prefix: String,
    timeout: Duration,
    conn: tokio::sync::Mutex<Option<MultiplexedConnection>>,
    release: redis::Script,
}

impl RedisLock {
    /// Connects to `url` (checking it answers `PING`); keys are `{prefix}lock:order:{id}`.
    pub async fn connect(url: &str, prefix: &str, timeout: Duration) -> Result<Self, LockError> {
        let client = redis::Client::open(url).map_err(|e| LockError(format!("bad Redis URL `{url}`: {e}")))?;
        let lock = Self {
            client,
            prefix: prefix.to_string(),
            timeout,
            conn: tokio::sync::Mutex::new(None),
            release: redis::Script::new(RELEASE),
        };
        lock.ping().await?;
        Ok(lock)
    }

    async fn connection(&self) -> Result<MultiplexedConnection, LockError> {
        let mut slot = self.conn.lock().await;
        if let Some(conn) = slot.as_ref() {
            return Ok(conn.clone());
        }
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(self.timeout)
            .set_response_timeout(self.timeout);
        let conn = tokio::time::timeout(
            self.timeout,
            self.client.get_multiplexed_async_connection_with_config(&config),
        )
        .await
        .map_err(|_| LockError("connecting to Redis timed out".into()))?
        .map_err(|e| LockError(format!("connecting to Redis: {e}")))?;
        *slot = Some(conn.clone());
        Ok(conn)
    }

    /// Runs one command with a timeout; on failure the connection is dropped.
    async fn run<T>(
        &self,
        what: &str,
        f: impl AsyncFnOnce(&mut MultiplexedConnection) -> redis::RedisResult<T>,
    ) -> Result<T, LockError> {
        let mut conn = self.connection().await?;
        match tokio::time::timeout(self.timeout, f(&mut conn)).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => {
                *self.conn.lock().await = None;
                Err(LockError(format!("Redis {what}: {e}")))
            }
            Err(_) => {
                *self.conn.lock().await = None;
                Err(LockError(format!("Redis {what} timed out")))
            }
        }
    }
}

#[async_trait]
impl OrderLock for RedisLock {
    fn kind(&self) -> &'static str {
        "redis"
    }

    async fn acquire(&self, order: &OrderId, ttl: Duration) -> Result<Option<LockLease>, LockError> {
        let name = format!("{}{}", self.prefix, lock_name(order));
        let token = LockToken::random();
        let ttl_ms = ttl.as_millis().max(1) as u64;
        let set: Option<String> = self
            .run("SET NX PX", async |c| {
                redis::cmd("SET")
                    .arg(&name)
                    .arg(token.as_str())
                    .arg("NX")
                    .arg("PX")
                    .arg(ttl_ms)
                    .query_async(c)
                    .await
            })
            .await?;
        Ok(set.map(|_| LockLease { name, token }))
    }

    async fn release(&self, lease: &LockLease) -> Result<bool, LockError> {
        let deleted: i64 = self
            .run("release", async |c| {
                self.release
                    .key(&lease.name)
                    .arg(lease.token.as_str())
                    .invoke_async(c)
                    .await
            })
            .await?;
        Ok(deleted == 1)
    }

    async fn ping(&self) -> Result<(), LockError> {
        let _: String = self
            .run("PING", async |c| redis::cmd("PING").query_async(c).await)
            .await?;
        Ok(())
    }
}
