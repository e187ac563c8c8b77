//! [`Store`] on PostgreSQL: the durable source of truth for key records and orders.
//!
//! Tables live in one schema of their own (`pg_schema`, so several merchants or parallel
//! tests share a database without colliding) and are created at start-up by numbered,
//! idempotent migrations (`CREATE … IF NOT EXISTS`, run under an advisory lock, recorded
//! in `merchant_migrations`). The invariants are the database's: the key is the primary
//! key of `merchant_idempotency_keys`, the order id of `merchant_orders`, a paid order
//! must name its payment intent, one payment intent pays at most one order, an order is
//! fulfilled at most once and a webhook event id is recorded once; an order
//! changes only by `UPDATE … WHERE id = $1 AND version = $2 AND status = $3`. Connections
//! come from a small pool of pipelined clients that are re-dialled when they break; every
//! call is bounded by a timeout and a failure is a retryable [`StoreError`].

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, NoTls, Row};

use super::idempotency_record::{Fingerprint, IdempotencyKey, KeyBegin, KeyRecord, StoredReply};
use super::order::{Amount, BadValue, Currency, Order, OrderId, OrderStatus, PaymentIntentId, PaymentMethod, Version};
use super::store::{FencedWrite, Store, StoreError};
use super::webhook::EventRecord;

/// The migrations, in order; each runs once per schema. `{s}` is the quoted schema.
const MIGRATIONS: &[&str] = &[
    // 1: key records and orders.
    r#"
    CREATE TABLE IF NOT EXISTS {s}.merchant_idempotency_keys (
        key          TEXT PRIMARY KEY,
        order_id     TEXT NOT NULL,
        fingerprint  TEXT NOT NULL,
        reply_status INTEGER,
        reply_body   TEXT,
        created_ms   BIGINT NOT NULL,
        expires_ms   BIGINT NOT NULL,
        CHECK ((reply_status IS NULL) = (reply_body IS NULL))
    );
    CREATE INDEX IF NOT EXISTS merchant_idempotency_keys_expires
        ON {s}.merchant_idempotency_keys (expires_ms);
    CREATE TABLE IF NOT EXISTS {s}.merchant_orders (
        id                  TEXT PRIMARY KEY,
        amount              BIGINT NOT NULL CHECK (amount > 0),
        currency            TEXT NOT NULL,
        payment_method      TEXT NOT NULL,
        status              TEXT NOT NULL
            CHECK (status IN ('pending', 'processing', 'paid', 'declined', 'reconciling')),
        version             BIGINT NOT NULL,
        generation          INTEGER NOT NULL,
        attempts            INTEGER NOT NULL,
        generation_attempts INTEGER NOT NULL,
        payment_intent      TEXT,
        decline_code        TEXT,
        decline_message     TEXT,
        last_error          TEXT,
        lease_until_ms      BIGINT NOT NULL,
        last_attempt_ms     BIGINT NOT NULL,
        created_ms          BIGINT NOT NULL,
        updated_ms          BIGINT NOT NULL,
        CHECK (status <> 'paid' OR payment_intent IS NOT NULL)
    );
    CREATE UNIQUE INDEX IF NOT EXISTS merchant_orders_payment_intent
        ON {s}.merchant_orders (payment_intent) WHERE payment_intent IS NOT NULL;
    CREATE INDEX IF NOT EXISTS merchant_orders_unsettled
        ON {s}.merchant_orders (updated_ms) WHERE status IN ('processing', 'reconciling');
    "#,
    // 2: fulfilment on webhooks — processed event ids (each once), and an order's
    // fulfilment count, which the database keeps at 0 or 1.
    r#"
    CREATE TABLE IF NOT EXISTS {s}.merchant_webhook_events (
        event_id    TEXT PRIMARY KEY,
        type        TEXT NOT NULL,
        order_id    TEXT NOT NULL,
        received_ms BIGINT NOT NULL,
        expires_ms  BIGINT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS merchant_webhook_events_expires
        ON {s}.merchant_webhook_events (expires_ms);
    ALTER TABLE {s}.merchant_orders
        ADD COLUMN IF NOT EXISTS fulfillments INTEGER NOT NULL DEFAULT 0
            CHECK (fulfillments IN (0, 1));
    "#,
];

/// Serialises concurrent migrations of any schema (`pg_advisory_xact_lock`).
const MIGRATION_LOCK: i64 = 0x0066_6175_7870_6179;

const ORDER_COLUMNS: &str = "id, amount, currency, payment_method, status, version, generation, attempts, \
     generation_attempts, payment_intent, decline_code, decline_message, last_error, lease_until_ms, \
     last_attempt_ms, created_ms, updated_ms, fulfillments";

const KEY_COLUMNS: &str = "key, order_id, fingerprint, reply_status, reply_body, created_ms, expires_ms";

/// A schema name: a lowercase SQL identifier.
fn valid_schema(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && name.len() <= 63
}

pub struct PostgresStore {
    config: tokio_postgres::Config,
    timeout: Duration,
    slots: Vec<Mutex<Option<Arc<Client>>>>,
    next: AtomicUsize,
    keys: String,
    orders: String,
    events: String,
}

impl PostgresStore {
    /// Connects to `url`, creates `schema` and its tables if needed, and returns a store
    /// with a pool of `pool_size` connections. Every call is bounded by `timeout`.
    pub async fn connect(url: &str, schema: &str, pool_size: usize, timeout: Duration) -> Result<Self, StoreError> {
        if !valid_schema(schema) {
            return Err(StoreError::Unavailable(format!(
                "bad PostgreSQL schema name `{schema}`: use lowercase letters, digits and `_`"
            )));
        }
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(|e| StoreError::Unavailable(format!("bad PostgreSQL URL: {e}")))?;
        config.connect_timeout(timeout);
        let store = Self {
            config,
            timeout,
            slots: (0..pool_size.max(1)).map(|_| Mutex::new(None)).collect(),
            next: AtomicUsize::new(0),
            keys: format!("\"{schema}\".merchant_idempotency_keys"),
            orders: format!("\"{schema}\".merchant_orders"),
            events: format!("\"{schema}\".merchant_webhook_events"),
        };
        store.migrate(schema).await?;
        Ok(store)
    }

    async fn dial(&self) -> Result<Client, StoreError> {
        let (client, connection) = bounded(self.timeout, "connect", self.config.connect(NoTls)).await?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "PostgreSQL connection closed");
            }
        });
        Ok(client)
    }

    async fn migrate(&self, schema: &str) -> Result<(), StoreError> {
        let mut client = self.dial().await?;
        let quoted = format!("\"{schema}\"");
        let run = async {
            let tx = client.transaction().await?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
                .await?;
            tx.batch_execute(&format!(
                "CREATE SCHEMA IF NOT EXISTS {quoted};
                 CREATE TABLE IF NOT EXISTS {quoted}.merchant_migrations (
                     version INTEGER PRIMARY KEY, applied_ms BIGINT NOT NULL);"
            ))
            .await?;
            let applied: Vec<i32> = tx
                .query(&format!("SELECT version FROM {quoted}.merchant_migrations"), &[])
                .await?
                .iter()
                .map(|r| r.get(0))
                .collect();
            for (i, sql) in MIGRATIONS.iter().enumerate() {
                let version = i as i32 + 1;
                if applied.contains(&version) {
                    continue;
                }
                tx.batch_execute(&sql.replace("{s}", &quoted)).await?;
                tx.execute(
                    &format!("INSERT INTO {quoted}.merchant_migrations (version, applied_ms) VALUES ($1, $2)"),
                    &[&version, &super::clock::now_ms()],
                )
                .await?;
                tracing::info!(schema, version, "merchant migration applied");
            }
            tx.commit().await
        };
        bounded(self.timeout * 5, "migrate", run).await
    }

    /// A live client from the pool (re-dialled if its connection broke).
    async fn client(&self) -> Result<Arc<Client>, StoreError> {
        let slot = &self.slots[self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len()];
        if let Some(client) = slot.lock().as_ref().filter(|c| !c.is_closed()) {
            return Ok(client.clone());
        }
        let client = Arc::new(self.dial().await?);
        *slot.lock() = Some(client.clone());
        Ok(client)
    }

    async fn query(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, StoreError> {
        let client = self.client().await?;
        bounded(self.timeout, "query", client.query(sql, params)).await
    }

    async fn execute(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64, StoreError> {
        let client = self.client().await?;
        bounded(self.timeout, "statement", client.execute(sql, params)).await
    }
}

/// Runs a PostgreSQL call with a timeout; every failure becomes [`StoreError::Unavailable`].
async fn bounded<T>(
    timeout: Duration,
    what: &str,
    fut: impl Future<Output = Result<T, tokio_postgres::Error>>,
) -> Result<T, StoreError> {
    match tokio::time::timeout(timeout, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(StoreError::Unavailable(format!("PostgreSQL {what}: {}", db_error(&e)))),
        Err(_) => Err(StoreError::Unavailable(format!("PostgreSQL {what} timed out"))),
    }
}

fn db_error(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => e.to_string(),
    }
}

fn corrupt(what: &str) -> impl Fn(tokio_postgres::Error) -> StoreError + '_ {
    move |e| StoreError::Corrupt(format!("{what}: {e}"))
}

fn key_from_row(row: &Row) -> Result<KeyRecord, StoreError> {
    let bad = corrupt("idempotency key row");
    let text: String = row.try_get("key").map_err(&bad)?;
    let order_id: String = row.try_get("order_id").map_err(&bad)?;
    let status: Option<i32> = row.try_get("reply_status").map_err(&bad)?;
    let body: Option<String> = row.try_get("reply_body").map_err(&bad)?;
    let reply = match (status, body) {
        (Some(status), Some(body)) => Some(StoredReply {
            status: u16::try_from(status).map_err(|_| StoreError::Corrupt(format!("reply status {status}")))?,
            body: serde_json::from_str(&body).map_err(|e| StoreError::Corrupt(format!("reply body: {e}")))?,
        }),
        _ => None,
    };
    Ok(KeyRecord {
        key: IdempotencyKey::parse(&text).map_err(|e| StoreError::Corrupt(e.0))?,
        order_id: OrderId::parse(&order_id).map_err(|e| StoreError::Corrupt(e.0))?,
        fingerprint: Fingerprint::from_hex(row.try_get("fingerprint").map_err(&bad)?),
        reply,
        created_ms: row.try_get("created_ms").map_err(&bad)?,
        expires_ms: row.try_get("expires_ms").map_err(&bad)?,
    })
}

fn order_from_row(row: &Row) -> Result<Order, StoreError> {
    let bad = corrupt("order row");
    let invalid = |e: BadValue| StoreError::Corrupt(format!("order row: {e}"));
    let count = |name: &str| -> Result<u32, StoreError> {
        let v: i32 = row.try_get(name).map_err(&bad)?;
        u32::try_from(v).map_err(|_| StoreError::Corrupt(format!("order row: {name} = {v}")))
    };
    let status: String = row.try_get("status").map_err(&bad)?;
    let amount: i64 = row.try_get("amount").map_err(&bad)?;
    let version: i64 = row.try_get("version").map_err(&bad)?;
    let id: String = row.try_get("id").map_err(&bad)?;
    let currency: String = row.try_get("currency").map_err(&bad)?;
    let payment_method: String = row.try_get("payment_method").map_err(&bad)?;
    Ok(Order {
        id: OrderId::parse(&id).map_err(invalid)?,
        amount: Amount::new(u64::try_from(amount).unwrap_or(0)).map_err(invalid)?,
        currency: Currency::parse(&currency).map_err(invalid)?,
        payment_method: PaymentMethod::parse(&payment_method).map_err(invalid)?,
        status: OrderStatus::parse(&status).ok_or_else(|| StoreError::Corrupt(format!("order status `{status}`")))?,
        version: Version::new(u64::try_from(version).unwrap_or(0)),
        generation: count("generation")?,
        attempts: count("attempts")?,
        generation_attempts: count("generation_attempts")?,
        payment_intent: row
            .try_get::<_, Option<String>>("payment_intent")
            .map_err(&bad)?
            .map(PaymentIntentId::new),
        decline_code: row.try_get("decline_code").map_err(&bad)?,
        decline_message: row.try_get("decline_message").map_err(&bad)?,
        last_error: row.try_get("last_error").map_err(&bad)?,
        lease_until_ms: row.try_get("lease_until_ms").map_err(&bad)?,
        last_attempt_ms: row.try_get("last_attempt_ms").map_err(&bad)?,
        fulfillments: count("fulfillments")?,
        created_ms: row.try_get("created_ms").map_err(&bad)?,
        updated_ms: row.try_get("updated_ms").map_err(&bad)?,
    })
}

/// The mutable columns of an order, as SQL parameters in `ORDER_COLUMNS` order from `status`.
struct OrderParams {
    amount: i64,
    version: i64,
    generation: i32,
    attempts: i32,
    generation_attempts: i32,
    payment_intent: Option<String>,
    fulfillments: i32,
}

impl OrderParams {
    fn of(o: &Order) -> Self {
        Self {
            amount: o.amount.get() as i64,
            version: o.version.get() as i64,
            generation: o.generation as i32,
            attempts: o.attempts as i32,
            generation_attempts: o.generation_attempts as i32,
            payment_intent: o.payment_intent.as_ref().map(|p| p.as_str().to_string()),
            fulfillments: o.fulfillments.min(i32::MAX as u32) as i32,
        }
    }
}

#[async_trait]
impl Store for PostgresStore {
    fn kind(&self) -> &'static str {
        "postgres"
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.execute("SELECT 1", &[]).await.map(|_| ())
    }

    async fn key(&self, key: &IdempotencyKey) -> Result<Option<KeyRecord>, StoreError> {
        let rows = self
            .query(
                &format!("SELECT {KEY_COLUMNS} FROM {} WHERE key = $1", self.keys),
                &[&key.as_str()],
            )
            .await?;
        rows.first().map(key_from_row).transpose()
    }

    async fn begin_key(&self, record: &KeyRecord, now_ms: i64) -> Result<KeyBegin, StoreError> {
        let insert = format!(
            "INSERT INTO {} ({KEY_COLUMNS}) VALUES ($1, $2, $3, NULL, NULL, $4, $5) ON CONFLICT (key) DO NOTHING",
            self.keys
        );
        // Insert; or read the live record; or delete an expired one and insert again.
        for _ in 0..3 {
            let inserted = self
                .execute(
                    &insert,
                    &[
                        &record.key.as_str(),
                        &record.order_id.as_str(),
                        &record.fingerprint.as_str(),
                        &record.created_ms,
                        &record.expires_ms,
                    ],
                )
                .await?;
            if inserted == 1 {
                return Ok(KeyBegin::Fresh);
            }
            match self.key(&record.key).await? {
                Some(existing) if !existing.is_expired(now_ms) => return Ok(KeyBegin::Existing(existing)),
                Some(_) => {
                    self.execute(
                        &format!("DELETE FROM {} WHERE key = $1 AND expires_ms <= $2", self.keys),
                        &[&record.key.as_str(), &now_ms],
                    )
                    .await?;
                }
                None => {}
            }
        }
        Err(StoreError::Unavailable(format!(
            "idempotency key `{}` kept changing under contention",
            record.key
        )))
    }

    async fn complete_key(
        &self,
        key: &IdempotencyKey,
        fingerprint: &Fingerprint,
        reply: &StoredReply,
    ) -> Result<(), StoreError> {
        let status = i32::from(reply.status);
        let body = reply.body.to_string();
        self.execute(
            &format!(
                "UPDATE {} SET reply_status = $3, reply_body = $4 \
                 WHERE key = $1 AND fingerprint = $2 AND reply_status IS NULL",
                self.keys
            ),
            &[&key.as_str(), &fingerprint.as_str(), &status, &body],
        )
        .await?;
        Ok(())
    }

    async fn prune_keys(&self, now_ms: i64) -> Result<u64, StoreError> {
        let keys = self
            .execute(&format!("DELETE FROM {} WHERE expires_ms <= $1", self.keys), &[&now_ms])
            .await?;
        let events = self
            .execute(
                &format!("DELETE FROM {} WHERE expires_ms <= $1", self.events),
                &[&now_ms],
            )
            .await?;
        Ok(keys + events)
    }

    async fn record_event(&self, event: &EventRecord) -> Result<bool, StoreError> {
        let inserted = self
            .execute(
                &format!(
                    "INSERT INTO {} (event_id, type, order_id, received_ms, expires_ms) \
                     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (event_id) DO NOTHING",
                    self.events
                ),
                &[
                    &event.id.as_str(),
                    &event.kind,
                    &event.order_id.as_str(),
                    &event.received_ms,
                    &event.expires_ms,
                ],
            )
            .await?;
        Ok(inserted == 1)
    }

    async fn create_order(&self, order: &Order) -> Result<Order, StoreError> {
        let p = OrderParams::of(order);
        let inserted = self
            .query(
                &format!(
                    "INSERT INTO {} ({ORDER_COLUMNS}) VALUES \
                     ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18) \
                     ON CONFLICT (id) DO NOTHING RETURNING {ORDER_COLUMNS}",
                    self.orders
                ),
                &[
                    &order.id.as_str(),
                    &p.amount,
                    &order.currency.as_str(),
                    &order.payment_method.as_str(),
                    &order.status.as_str(),
                    &p.version,
                    &p.generation,
                    &p.attempts,
                    &p.generation_attempts,
                    &p.payment_intent,
                    &order.decline_code,
                    &order.decline_message,
                    &order.last_error,
                    &order.lease_until_ms,
                    &order.last_attempt_ms,
                    &order.created_ms,
                    &order.updated_ms,
                    &p.fulfillments,
                ],
            )
            .await?;
        if let Some(row) = inserted.first() {
            return order_from_row(row);
        }
        self.order(&order.id)
            .await?
            .ok_or_else(|| StoreError::Unavailable(format!("order {} vanished after a conflicting insert", order.id)))
    }

    async fn order(&self, id: &OrderId) -> Result<Option<Order>, StoreError> {
        let rows = self
            .query(
                &format!("SELECT {ORDER_COLUMNS} FROM {} WHERE id = $1", self.orders),
                &[&id.as_str()],
            )
            .await?;
        rows.first().map(order_from_row).transpose()
    }

    async fn write_order(&self, expected: &Order, next: &Order) -> Result<FencedWrite, StoreError> {
        let p = OrderParams::of(next);
        let expected_version = expected.version.get() as i64;
        let updated = self
            .execute(
                &format!(
                    "UPDATE {} SET payment_method = $4, status = $5, version = $6, generation = $7, attempts = $8, \
                     generation_attempts = $9, payment_intent = $10, decline_code = $11, decline_message = $12, \
                     last_error = $13, lease_until_ms = $14, last_attempt_ms = $15, updated_ms = $16, \
                     fulfillments = $17 \
                     WHERE id = $1 AND version = $2 AND status = $3",
                    self.orders
                ),
                &[
                    &expected.id.as_str(),
                    &expected_version,
                    &expected.status.as_str(),
                    &next.payment_method.as_str(),
                    &next.status.as_str(),
                    &p.version,
                    &p.generation,
                    &p.attempts,
                    &p.generation_attempts,
                    &p.payment_intent,
                    &next.decline_code,
                    &next.decline_message,
                    &next.last_error,
                    &next.lease_until_ms,
                    &next.last_attempt_ms,
                    &next.updated_ms,
                    &p.fulfillments,
                ],
            )
            .await?;
        Ok(if updated == 1 {
            FencedWrite::Applied
        } else {
            FencedWrite::Fenced
        })
    }

    async fn orders_to_reconcile(&self, now_ms: i64, limit: usize) -> Result<Vec<Order>, StoreError> {
        let limit = limit as i64;
        let rows = self
            .query(
                &format!(
                    "SELECT {ORDER_COLUMNS} FROM {} \
                     WHERE status = 'reconciling' OR (status = 'processing' AND lease_until_ms <= $1) \
                     ORDER BY updated_ms LIMIT $2",
                    self.orders
                ),
                &[&now_ms, &limit],
            )
            .await?;
        rows.iter().map(order_from_row).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::valid_schema;

    #[test]
    fn schema_names_are_plain_identifiers() {
        assert!(valid_schema("fauxpay_merchant"));
        assert!(valid_schema("t_1a2b"));
        assert!(!valid_schema("Public"));
        assert!(!valid_schema("1abc"));
        assert!(!valid_schema("a\"; drop"));
        assert!(!valid_schema(""));
    }
}
