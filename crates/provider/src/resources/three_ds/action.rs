//! What 3-D Secure decides and hands out: whether a confirmation may go to the issuer,
//! must wait for the customer to authenticate, or (off-session, with nobody there to
//! authenticate) is declined; the `next_action` of an intent waiting in
//! `requires_action`, in Stripe's shape, pointing at fauxpay's own page; and the
//! parameters of an authenticate request (`outcome=succeed|fail`).

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use crate::error::ApiError;
use crate::stripe::cards::{Authentication, TestCard};
use crate::stripe::params::Params;

/// Where fauxpay serves the authentication page of an intent (`pi_…` or `seti_…`).
pub const PAGE_PATH: &str = "/__fauxpay/3ds/";

/// What happens to a payment when it is confirmed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Straight to the issuer.
    Proceed,
    /// The customer must authenticate first: `requires_action`.
    Challenge,
    /// Off-session, on a card that wants authentication: declined with
    /// `authentication_required`.
    Refuse,
}

/// The gate of a payment of `card`. `set_up`: the payment method was set up for
/// off-session use; `off_session`: the customer is not there to authenticate.
pub fn payment_gate(card: &TestCard, set_up: bool, off_session: bool) -> Gate {
    let wants = match card.authentication {
        Authentication::None => false,
        Authentication::UnlessSetUp => !set_up,
        Authentication::Always => true,
    };
    match (wants, off_session) {
        (false, _) => Gate::Proceed,
        (true, false) => Gate::Challenge,
        (true, true) => Gate::Refuse,
    }
}

/// Whether setting `card` up (a setup intent) asks the customer to authenticate: every
/// card that ever asks for it does, on setup.
pub fn setup_challenges(card: &TestCard) -> bool {
    card.authentication != Authentication::None
}

/// The `next_action` of an intent waiting for authentication: `redirect_to_url` when
/// the client gave a `return_url`, else `use_stripe_sdk` (what Stripe answers a
/// server-side confirmation without one). Either way the URL is fauxpay's page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NextAction {
    pub url: Box<str>,
    pub return_url: Option<Box<str>>,
}

impl NextAction {
    /// The action for intent `id`, its page under `origin` (`http://host:port`; the
    /// path alone when the request's origin is unknown).
    pub fn new(origin: Option<&str>, id: &str, return_url: Option<&str>) -> Self {
        Self {
            url: format!("{}{PAGE_PATH}{id}", origin.unwrap_or("")).into(),
            return_url: return_url.map(Box::from),
        }
    }

    pub fn kind(&self) -> &'static str {
        if self.return_url.is_some() {
            "redirect_to_url"
        } else {
            "use_stripe_sdk"
        }
    }
}

#[derive(Serialize)]
struct RedirectToUrl<'a> {
    return_url: &'a str,
    url: &'a str,
}

#[derive(Serialize)]
struct UseStripeSdk<'a> {
    stripe_js: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
}

impl Serialize for NextAction {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        match &self.return_url {
            Some(return_url) => {
                m.serialize_entry(
                    "redirect_to_url",
                    &RedirectToUrl {
                        return_url,
                        url: &self.url,
                    },
                )?;
                m.serialize_entry("type", "redirect_to_url")?;
            }
            None => {
                m.serialize_entry("type", "use_stripe_sdk")?;
                m.serialize_entry(
                    "use_stripe_sdk",
                    &UseStripeSdk {
                        stripe_js: &self.url,
                        kind: "three_d_secure_redirect",
                    },
                )?;
            }
        }
        m.end()
    }
}

/// How the customer's authentication went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Succeed,
    Fail,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Succeed => "succeed",
            Outcome::Fail => "fail",
        }
    }
}

/// An authenticate request: `outcome` (required), and `redirect=true` from the page's
/// form (answer with the page's redirect rather than JSON). Nothing else is accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Authenticate {
    pub outcome: Outcome,
    pub redirect: bool,
}

impl Authenticate {
    pub fn parse(p: &Params) -> Result<Self, ApiError> {
        if let Some((name, _)) = p.object().iter().find(|(k, _)| !matches!(*k, "outcome" | "redirect")) {
            return Err(ApiError::invalid_request(
                format!("Received unknown parameter: {name}"),
                Some(name.to_string()),
            )
            .with_code("parameter_unknown"));
        }
        let outcome = match p.req_str("outcome")? {
            "succeed" => Outcome::Succeed,
            "fail" => Outcome::Fail,
            _ => {
                return Err(ApiError::invalid_param(
                    "outcome",
                    "Invalid outcome: must be one of succeed or fail",
                ))
            }
        };
        Ok(Self {
            outcome,
            redirect: p.opt_bool("redirect")?.unwrap_or(false),
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn card(name: &str) -> &'static TestCard {
        TestCard::resolve(&format!("pm_card_{name}")).unwrap()
    }

    #[test]
    fn gates_follow_the_card_and_whether_it_was_set_up() {
        use Gate::*;
        let cases = [
            ("visa", [Proceed, Proceed, Proceed, Proceed]),
            ("chargeDeclined", [Proceed, Proceed, Proceed, Proceed]),
            ("authenticationRequiredOnSetup", [Challenge, Refuse, Proceed, Proceed]),
            ("authenticationRequired", [Challenge, Refuse, Challenge, Refuse]),
            ("threeDSecure2Required", [Challenge, Refuse, Challenge, Refuse]),
            (
                "authenticationRequiredChargeDeclinedInsufficientFunds",
                [Challenge, Refuse, Challenge, Refuse],
            ),
        ];
        for (name, expected) in cases {
            let c = card(name);
            let got = [
                payment_gate(c, false, false),
                payment_gate(c, false, true),
                payment_gate(c, true, false),
                payment_gate(c, true, true),
            ];
            assert_eq!(got, expected, "{name}: [on, off] session, [not set up, set up]");
        }
        assert!(setup_challenges(card("authenticationRequiredOnSetup")));
        assert!(setup_challenges(card("threeDSecureRequiredChargeDeclined")));
        assert!(!setup_challenges(card("visa")));
    }

    #[test]
    fn next_actions_have_stripes_shapes() {
        let sdk = NextAction::new(Some("http://127.0.0.1:12111"), "pi_1", None);
        assert_eq!(sdk.kind(), "use_stripe_sdk");
        assert_eq!(
            serde_json::to_value(&sdk).unwrap(),
            json!({"type": "use_stripe_sdk", "use_stripe_sdk": {
                "stripe_js": "http://127.0.0.1:12111/__fauxpay/3ds/pi_1",
                "type": "three_d_secure_redirect"}})
        );
        let redirect = NextAction::new(None, "seti_1", Some("https://shop.example/back?a=1"));
        assert_eq!(redirect.kind(), "redirect_to_url");
        assert_eq!(
            serde_json::to_value(&redirect).unwrap(),
            json!({"type": "redirect_to_url", "redirect_to_url": {
                "url": "/__fauxpay/3ds/seti_1", "return_url": "https://shop.example/back?a=1"}})
        );
    }

    #[test]
    fn authenticate_requests_take_an_outcome_and_nothing_unknown() {
        let parse = |s: &str| Authenticate::parse(&Params::from_form(s.as_bytes()).unwrap());
        assert_eq!(
            parse("outcome=succeed").unwrap(),
            Authenticate {
                outcome: Outcome::Succeed,
                redirect: false
            }
        );
        assert_eq!(parse("outcome=fail&redirect=true").unwrap().outcome, Outcome::Fail);
        assert!(parse("outcome=fail&redirect=true").unwrap().redirect);
        for (body, code, param) in [
            ("", "parameter_missing", "outcome"),
            ("outcome=maybe", "parameter_invalid", "outcome"),
            ("outcome=fail&outcom=x", "parameter_unknown", "outcom"),
            ("outcome=fail&redirect=yes", "parameter_invalid", "redirect"),
        ] {
            let e = parse(body).unwrap_err();
            assert_eq!(
                (e.code.as_deref(), e.param.as_deref()),
                (Some(code), Some(param)),
                "{body}"
            );
            assert_eq!(e.status.code(), 400);
        }
    }
}
