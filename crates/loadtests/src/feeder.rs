//! Data feeders (`fauxpay load --data FILE.csv`, or the bundled `stripe-cards`): rows of
//! values that each payment takes one of, in order or drawn from the payment's seeded
//! generator, as Gatling's and k6's feeders do.
//!
//! A CSV with a header row. The columns `payment_method`, `amount` and `currency` replace
//! the run's own values for the payment; `expect` (`ok` or `fail`) says what the card
//! should do, so that the reconciliation can tell an expected decline (not an anomaly) from
//! a card that should have declined and was charged (an anomaly); every column, those
//! included, is a placeholder `{{column}}` the template may use. Every row is checked when
//! the file is read: a bad one is one line naming the file, the row and the column.

use rand::rngs::StdRng;
use rand::Rng;

use crate::client::Outcome;
use crate::error::ConfigError;

/// How rows are handed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Order {
    /// Payment n takes row n (wrapping around).
    Sequential,
    /// Each payment draws a row from its seeded generator.
    Random,
    /// Payment n takes row n, and no row is taken twice: the run must not have more
    /// payments than rows (`--users` × `--iterations`, checked before it starts).
    Once,
}

/// Stripe's test cards with what each should do (the provider models them all).
pub const STRIPE_CARDS: &str = "\
payment_method,expect,what
pm_card_visa,ok,succeeds
pm_card_mastercard,ok,succeeds
pm_card_amex,ok,succeeds
pm_card_visa_debit,ok,succeeds
pm_card_chargeDeclined,fail,declined: generic_decline
pm_card_chargeDeclinedInsufficientFunds,fail,declined: insufficient_funds
pm_card_chargeDeclinedLostCard,fail,declined: lost_card
pm_card_chargeDeclinedExpiredCard,fail,declined: expired_card
pm_card_chargeDeclinedIncorrectCvc,fail,declined: incorrect_cvc
pm_card_authenticationRequired,ok,3-D Secure then succeeds
pm_card_threeDSecure2Required,ok,3-D Secure then succeeds
pm_card_authenticationRequiredChargeDeclinedInsufficientFunds,fail,3-D Secure then declined: insufficient_funds
";

/// The bundled feeders, by name.
pub const BUNDLED: &[(&str, &str)] = &[("stripe-cards", STRIPE_CARDS)];

/// The most rows a feeder holds, and the most bytes of its file.
const MAX_ROWS: usize = 1_000_000;
const MAX_BYTES: u64 = 256 << 20;

/// A feeder's rows, checked.
#[derive(Debug, Clone)]
pub struct Feeder {
    pub name: String,
    pub columns: Vec<String>,
    rows: Vec<Row>,
    order: Order,
    currency: Option<usize>,
    payment_method: Option<usize>,
}

/// One row: its values, and what they say the payment should do.
#[derive(Debug, Clone)]
pub struct Row {
    pub values: Vec<String>,
    pub amount: Option<u64>,
    pub expect: Option<Outcome>,
}

impl Feeder {
    /// A bundled feeder by name, or a CSV file by path.
    pub fn load(name_or_path: &str, order: Order) -> Result<Self, ConfigError> {
        if let Some((name, text)) = BUNDLED.iter().find(|(n, _)| *n == name_or_path) {
            return Self::parse(name, text, order);
        }
        let meta = std::fs::metadata(name_or_path).map_err(|e| {
            ConfigError::new(
                name_or_path,
                "data",
                format!("a readable CSV file or stripe-cards ({e})"),
            )
        })?;
        if meta.len() > MAX_BYTES {
            return Err(ConfigError::new(
                name_or_path,
                "data",
                format!("at most {} MiB of CSV", MAX_BYTES >> 20),
            ));
        }
        let text = std::fs::read_to_string(name_or_path)
            .map_err(|e| ConfigError::new(name_or_path, "data", format!("a readable UTF-8 CSV file ({e})")))?;
        Self::parse(name_or_path, &text, order)
    }

    pub fn parse(file: &str, text: &str, order: Order) -> Result<Self, ConfigError> {
        let mut reader = csv::ReaderBuilder::new()
            .trim(csv::Trim::All)
            // A row of the wrong length is said by this module, naming the row.
            .flexible(true)
            .from_reader(text.as_bytes());
        let columns: Vec<String> = reader
            .headers()
            .map_err(|e| ConfigError::new(file, "header", format!("a header row of column names ({e})")))?
            .iter()
            .map(str::to_string)
            .collect();
        for (i, c) in columns.iter().enumerate() {
            let valid = !c.is_empty() && c.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_');
            if ["order_id", "idempotency_key", "api_key"].contains(&c.as_str()) {
                return Err(ConfigError::new(
                    file,
                    "header",
                    format!("columns other than '{c}' (the run makes it for every payment)"),
                ));
            }
            if !valid || columns[..i].contains(c) {
                return Err(ConfigError::new(
                    file,
                    "header",
                    format!("distinct column names of letters, digits and _, got '{c}'"),
                ));
            }
        }
        let at = |name: &str| columns.iter().position(|c| c == name);
        let (amount, currency, payment_method, expect) =
            (at("amount"), at("currency"), at("payment_method"), at("expect"));
        let mut rows = Vec::new();
        for record in reader.records() {
            let record = record.map_err(|e| {
                let line = e.position().map_or(0, |p| p.line());
                ConfigError::new(file, &format!("row {line}"), format!("a CSV row ({e})"))
            })?;
            // The row's line in the file (a quoted value may span lines).
            let line = record.position().map_or(0, |p| p.line());
            let field = |c: &str| format!("row {line}.{c}");
            if record.len() != columns.len() {
                return Err(ConfigError::new(
                    file,
                    &format!("row {line}"),
                    format!("{} values, one per column, got {}", columns.len(), record.len()),
                ));
            }
            if rows.len() == MAX_ROWS {
                return Err(ConfigError::new(file, "data", format!("at most {MAX_ROWS} rows")));
            }
            let values: Vec<String> = record.iter().map(str::to_string).collect();
            let amount = match amount {
                Some(i) => Some(values[i].parse::<u64>().ok().filter(|a| *a > 0).ok_or_else(|| {
                    ConfigError::new(
                        file,
                        &field("amount"),
                        format!("a positive whole amount in the smallest unit, got '{}'", values[i]),
                    )
                })?),
                None => None,
            };
            if let Some(i) = currency {
                let c = &values[i];
                if c.len() != 3 || !c.bytes().all(|b| b.is_ascii_lowercase()) {
                    return Err(ConfigError::new(
                        file,
                        &field("currency"),
                        format!("a lowercase ISO code such as usd, got '{c}'"),
                    ));
                }
            }
            if let Some(i) = payment_method {
                if values[i].is_empty() {
                    return Err(ConfigError::new(
                        file,
                        &field("payment_method"),
                        "a payment method (pm_card_visa, a card number, …)",
                    ));
                }
            }
            let expect = match expect.map(|i| values[i].as_str()) {
                None => None,
                Some("ok") => Some(Outcome::Ok),
                Some("fail") => Some(Outcome::Fail),
                Some(other) => {
                    return Err(ConfigError::new(
                        file,
                        &field("expect"),
                        format!("ok or fail, got '{other}'"),
                    ));
                }
            };
            rows.push(Row { values, amount, expect });
        }
        if rows.is_empty() {
            return Err(ConfigError::new(file, "data", "at least one row after the header"));
        }
        Ok(Self {
            name: file.to_string(),
            columns,
            rows,
            order,
            currency,
            payment_method,
        })
    }

    /// The row payment number `index` (from 1) takes.
    pub fn row(&self, index: u64, rng: &mut StdRng) -> &Row {
        let i = match self.order {
            Order::Sequential | Order::Once => (index.saturating_sub(1) % self.rows.len() as u64) as usize,
            Order::Random => rng.random_range(0..self.rows.len()),
        };
        &self.rows[i]
    }

    /// The row's currency and payment method, when the feeder has those columns.
    pub fn currency<'r>(&self, row: &'r Row) -> Option<&'r str> {
        self.currency.map(|i| row.values[i].as_str())
    }

    pub fn payment_method<'r>(&self, row: &'r Row) -> Option<&'r str> {
        self.payment_method.map(|i| row.values[i].as_str())
    }

    pub fn rows(&self) -> usize {
        self.rows.len()
    }

    pub fn order(&self) -> Order {
        self.order
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn rows_are_checked_and_handed_out_in_order_or_by_the_seed() {
        let f = Feeder::parse(
            "cards.csv",
            "payment_method, amount ,currency,expect,note\npm_card_visa,500,usd,ok,\"a, quoted\"\npm_card_chargeDeclined,700,eur,fail,x\n",
            Order::Sequential,
        )
        .unwrap();
        assert_eq!(f.columns, ["payment_method", "amount", "currency", "expect", "note"]);
        let mut rng = StdRng::seed_from_u64(1);
        let first = f.row(1, &mut rng);
        assert_eq!((first.amount, first.expect), (Some(500), Some(Outcome::Ok)));
        assert_eq!(first.values[4], "a, quoted");
        assert_eq!(f.payment_method(f.row(2, &mut rng)), Some("pm_card_chargeDeclined"));
        assert_eq!(f.currency(f.row(3, &mut rng)), Some("usd"), "wraps around");
        let random = Feeder::parse("cards.csv", "payment_method\na\nb\nc\nd\n", Order::Random).unwrap();
        let draw = |seed| {
            let mut rng = StdRng::seed_from_u64(seed);
            (1..=8)
                .map(|i| random.row(i, &mut rng).values[0].clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(5), draw(5));
        assert_ne!(draw(5), draw(6));
        assert_eq!(Feeder::load("stripe-cards", Order::Sequential).unwrap().rows(), 12);
    }

    #[test]
    fn a_bad_row_is_one_line_naming_the_file_the_row_and_the_column() {
        for (text, wants) in [
            (
                "amount\n0\n",
                "cards.csv: row 2.amount: expected a positive whole amount",
            ),
            (
                "amount,currency\n5,USD\n",
                "cards.csv: row 2.currency: expected a lowercase ISO code",
            ),
            (
                "expect\nmaybe\n",
                "cards.csv: row 2.expect: expected ok or fail, got 'maybe'",
            ),
            ("a,b\n1\n", "cards.csv: row 2: expected 2 values, one per column, got 1"),
            ("a,a\n1,2\n", "cards.csv: header: expected distinct column names"),
            ("card number\n1\n", "cards.csv: header: expected distinct column names"),
            (
                "order_id\n1\n",
                "cards.csv: header: expected columns other than 'order_id'",
            ),
            // A quoted value over two lines: the bad row is the file's line 4.
            ("a\n\"1\n2\"\nx,y\n", "cards.csv: row 4: expected 1 values"),
            ("a\n", "cards.csv: data: expected at least one row"),
        ] {
            let e = Feeder::parse("cards.csv", text, Order::Sequential)
                .unwrap_err()
                .to_string();
            assert!(e.starts_with(wants), "{e}");
            assert_eq!(e.lines().count(), 1);
        }
    }
}
