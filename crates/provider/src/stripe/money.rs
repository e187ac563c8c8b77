//! Amounts and currencies, validated as Stripe validates them.
//!
//! Amounts are integers in the currency's smallest unit. Stripe accepts at most eight
//! digits (99,999,999) and rejects charges below a per-currency minimum (50 cents for
//! USD, 50 yen for JPY, …); currencies are lowercase ISO 4217 codes from a known list.

use crate::error::ApiError;

/// Largest amount Stripe accepts (eight digits).
pub const MAX_AMOUNT: u64 = 99_999_999;

/// An amount a stored object keeps, checked against [`MAX_AMOUNT`] before (so four bytes
/// hold it): a payment intent's `amount_received`, a charge's `amount_captured`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StoredAmount(u32);

impl StoredAmount {
    /// `amount`, held to what four bytes hold (never reached: amounts are checked).
    pub fn new(amount: u64) -> Self {
        debug_assert!(amount <= MAX_AMOUNT, "an unchecked amount: {amount}");
        Self(u32::try_from(amount).unwrap_or(u32::MAX))
    }

    pub fn get(self) -> u64 {
        u64::from(self.0)
    }
}

impl serde::Serialize for StoredAmount {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.get())
    }
}

/// Known currencies and the minimum charge amount in each (smallest unit).
const CURRENCIES: &[(&str, u64)] = &[
    ("usd", 50),
    ("aed", 200),
    ("aud", 50),
    ("brl", 50),
    ("cad", 50),
    ("chf", 50),
    ("cny", 400),
    ("czk", 1500),
    ("dkk", 250),
    ("eur", 50),
    ("gbp", 30),
    ("hkd", 400),
    ("huf", 17500),
    ("inr", 50),
    ("jpy", 50),
    ("krw", 100),
    ("mxn", 1000),
    ("myr", 200),
    ("nok", 300),
    ("nzd", 50),
    ("pln", 200),
    ("ron", 200),
    ("sek", 300),
    ("sgd", 50),
    ("thb", 1000),
    ("try", 50),
    ("zar", 50),
];

/// A validated currency code (one byte: its place in the list of known currencies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Currency(u8);

impl Currency {
    pub fn parse(code: &str) -> Result<Self, ApiError> {
        CURRENCIES
            .iter()
            .position(|(c, _)| *c == code)
            .map(|i| Currency(i as u8))
            .ok_or_else(|| {
                ApiError::invalid_param(
                    "currency",
                    format!("Invalid currency: {code}. Stripe currencies are three-letter lowercase ISO codes (usd, eur, gbp, jpy, …)."),
                )
            })
    }

    pub fn code(self) -> &'static str {
        CURRENCIES[self.0 as usize].0
    }

    fn minimum(self) -> u64 {
        CURRENCIES[self.0 as usize].1
    }
}

impl serde::Serialize for Currency {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.code())
    }
}

/// An amount in minor units with its currency, as a person reads it (`12.34 usd`;
/// zero-decimal currencies as they are).
pub fn display(amount: u64, currency: &str) -> String {
    const ZERO_DECIMAL: &[&str] = &[
        "bif", "clp", "djf", "gnf", "jpy", "kmf", "krw", "mga", "pyg", "rwf", "ugx", "vnd", "vuv", "xaf", "xof", "xpf",
    ];
    if ZERO_DECIMAL.contains(&currency) {
        format!("{amount} {currency}")
    } else {
        format!("{}.{:02} {currency}", amount / 100, amount % 100)
    }
}

/// Checks a charge amount (in `param`) against Stripe's bounds for `currency`.
pub fn check_amount(param: &str, amount: u64, currency: Currency) -> Result<u64, ApiError> {
    if amount == 0 {
        return Err(ApiError::invalid_param(
            param,
            format!("Invalid {param}: must be a positive integer."),
        ));
    }
    if amount > MAX_AMOUNT {
        return Err(ApiError::invalid_param(
            param,
            format!("Amount must be no more than {MAX_AMOUNT} (in the currency's smallest unit)."),
        )
        .with_code("amount_too_large"));
    }
    if amount < currency.minimum() {
        return Err(ApiError::invalid_param(
            param,
            format!(
                "Amount must be at least {} {} (in the smallest unit).",
                currency.minimum(),
                currency.code()
            ),
        )
        .with_code("amount_too_small"));
    }
    Ok(amount)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_amount_holds_every_checked_amount() {
        assert_eq!(std::mem::size_of::<StoredAmount>(), 4);
        let max = StoredAmount::new(MAX_AMOUNT);
        assert_eq!(
            (max.get(), serde_json::to_string(&max).unwrap()),
            (MAX_AMOUNT, "99999999".into())
        );
        assert_eq!(StoredAmount::default().get(), 0);
    }

    #[test]
    fn currencies_are_lowercase_known_codes() {
        assert!(Currency::parse("usd").is_ok());
        assert_eq!(Currency::parse("USD").unwrap_err().param.as_deref(), Some("currency"));
        assert!(Currency::parse("xyz").is_err());
    }

    #[test]
    fn amounts_are_bounded() {
        let usd = Currency::parse("usd").unwrap();
        assert_eq!(check_amount("amount", 50, usd).unwrap(), 50);
        assert_eq!(
            check_amount("amount", 49, usd).unwrap_err().code.as_deref(),
            Some("amount_too_small")
        );
        assert_eq!(
            check_amount("amount", 100_000_000, usd).unwrap_err().code.as_deref(),
            Some("amount_too_large")
        );
        assert!(check_amount("amount", 0, usd).is_err());
    }
}
