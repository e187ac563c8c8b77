"""Payment flows written against Stripe's official Python SDK (`stripe` on PyPI), pointed
at fauxpay by nothing but the SDK's base address.

Run by crates/provider/tests/it/official_sdks.rs as `python flows.py FLOW BASE_URL`. Each flow asserts what
the SDK shows (its typed objects, its exception classes, its webhook verifier) and prints
one JSON line of what it did, for the Rust test to check against the provider's ledger.
The same flows as flows.cjs.
"""

import http.server
import json
import sys
import threading
import urllib.parse
import urllib.request

import stripe

KEY = "sk_test_fauxpay_python"


def client(url, retries=0):
    return stripe.StripeClient(KEY, base_addresses={"api": url}, max_network_retries=retries)


def charge_params(order, amount=2000, payment_method="pm_card_visa", **extra):
    params = {
        "amount": amount,
        "currency": "usd",
        "payment_method": payment_method,
        "confirm": True,
        "metadata": {"order_id": order},
    }
    params.update(extra)
    return params


def expect_error(cls, call):
    try:
        call()
    except cls as e:
        return e
    raise AssertionError(f"expected {cls.__name__}")


def payments(url):
    c = client(url)
    pi = c.v1.payment_intents.create(params=charge_params("sdk-1"))
    assert isinstance(pi, stripe.PaymentIntent), type(pi)
    assert pi.status == "succeeded" and pi.amount_received == 2000, pi
    # Every POST carries an idempotency key the SDK made up.
    assert pi.last_response.headers.get("Idempotency-Key"), pi.last_response.headers
    charge = c.v1.charges.retrieve(pi.latest_charge)
    assert isinstance(charge, stripe.Charge) and charge.paid and charge.payment_intent == pi.id, charge
    expanded = c.v1.payment_intents.retrieve(pi.id, params={"expand": ["latest_charge", "payment_method"]})
    assert isinstance(expanded.latest_charge, stripe.Charge), expanded.latest_charge
    assert isinstance(expanded.payment_method, stripe.PaymentMethod), expanded.payment_method
    assert expanded.payment_method.card.brand == "visa", expanded.payment_method

    declined = expect_error(
        stripe.CardError,
        lambda: c.v1.payment_intents.create(
            params=charge_params("sdk-declined", payment_method="pm_card_chargeDeclinedInsufficientFunds")
        ),
    )
    assert declined.http_status == 402 and declined.code == "card_declined", declined
    assert declined.error.decline_code == "insufficient_funds", declined.error
    assert declined.error.payment_intent.status == "requires_payment_method", declined.error
    assert declined.request_id and declined.request_id.startswith("req_"), declined.request_id

    unknown = expect_error(
        stripe.InvalidRequestError,
        lambda: c.v1.payment_intents.create(params={"amount": 2000, "currency": "usd", "bogus": 1}),
    )
    assert unknown.http_status == 400 and unknown.param == "bogus", unknown
    missing = expect_error(stripe.InvalidRequestError, lambda: c.v1.payment_intents.create(params={"currency": "usd"}))
    assert missing.param == "amount", missing
    bad_key = stripe.StripeClient("not-a-key", base_addresses={"api": url})
    unauthorized = expect_error(stripe.AuthenticationError, lambda: bad_key.v1.customers.list())
    assert unauthorized.http_status == 401, unauthorized

    # A key given by the caller: the second call is a replay; other parameters are refused.
    key = {"idempotency_key": "sdk-order-2-attempt"}
    first = c.v1.payment_intents.create(params=charge_params("sdk-2", amount=700), options=key)
    again = c.v1.payment_intents.create(params=charge_params("sdk-2", amount=700), options=key)
    assert again.id == first.id, (first.id, again.id)
    assert again.last_response.headers.get("Idempotent-Replayed") == "true", again.last_response.headers
    reused = expect_error(
        stripe.IdempotencyError,
        lambda: c.v1.payment_intents.create(params=charge_params("sdk-2", amount=701), options=key),
    )
    assert reused.http_status == 400, reused

    refund = c.v1.refunds.create(params={"payment_intent": pi.id, "amount": 500})
    assert isinstance(refund, stripe.Refund) and refund.status == "succeeded", refund
    assert c.v1.charges.retrieve(pi.latest_charge).amount_refunded == 500
    noted = c.v1.refunds.update(refund.id, params={"metadata": {"ticket": "T-1"}})
    assert noted.metadata.to_dict() == {"ticket": "T-1"}, noted
    charge = c.v1.charges.update(pi.latest_charge, params={"description": "order sdk-1", "metadata": {"shipped": "no"}})
    assert charge.description == "order sdk-1" and charge.metadata["shipped"] == "no", charge
    assert charge.metadata["order_id"] == "sdk-1", charge.metadata
    # The older resource API (module-level configuration), as existing integrations use it,
    # including a charge's own refunds.
    stripe.api_key, stripe.api_base = KEY, url
    assert [r.id for r in stripe.Charge.list_refunds(pi.latest_charge).data] == [refund.id]
    assert stripe.Charge.retrieve_refund(pi.latest_charge, refund.id).metadata["ticket"] == "T-1"
    assert stripe.PaymentIntent.retrieve(pi.id).latest_charge == pi.latest_charge

    held = c.v1.payment_intents.create(params=charge_params("sdk-3", amount=900, capture_method="manual"))
    assert held.status == "requires_capture", held
    captured = c.v1.payment_intents.capture(held.id, params={"amount_to_capture": 600})
    assert captured.status == "succeeded" and captured.amount_received == 600, captured

    abandoned = c.v1.payment_intents.create(params={"amount": 900, "currency": "usd"})
    assert abandoned.status == "requires_payment_method", abandoned
    assert c.v1.payment_intents.cancel(abandoned.id).status == "canceled"

    # Lists page through with the SDK's own paging; search finds by metadata.
    listed = [p.id for p in c.v1.payment_intents.list(params={"limit": 2}).auto_paging_iter()]
    assert len(listed) == len(set(listed)) and {pi.id, first.id, held.id, abandoned.id} <= set(listed), listed
    found = c.v1.payment_intents.search(params={"query": "metadata['order_id']:'sdk-1'"})
    assert [p.id for p in found.data] == [pi.id], found

    # A saved card: customer, setup intent for off-session use, then an off-session charge.
    customer = c.v1.customers.create(params={"email": "jenny@example.com"})
    setup = c.v1.setup_intents.create(
        params={"customer": customer.id, "payment_method": "pm_card_visa", "confirm": True, "usage": "off_session"}
    )
    assert isinstance(setup, stripe.SetupIntent) and setup.status == "succeeded", setup
    noted = c.v1.setup_intents.update(setup.id, params={"metadata": {"plan": "pro"}})
    assert noted.metadata["plan"] == "pro", noted
    saved = c.v1.customers.payment_methods.list(customer.id)
    assert [p.id for p in saved.data] == [setup.payment_method], saved
    one = c.v1.customers.payment_methods.retrieve(customer.id, setup.payment_method)
    assert isinstance(one, stripe.PaymentMethod) and one.customer == customer.id, one
    off = c.v1.payment_intents.create(
        params=charge_params("sdk-4", amount=1234, payment_method=setup.payment_method, customer=customer.id, off_session=True)
    )
    assert off.status == "succeeded" and off.customer == customer.id, off

    challenged = c.v1.payment_intents.create(
        params=charge_params("sdk-5", payment_method="pm_card_threeDSecure2Required", return_url="https://example.com/done")
    )
    assert challenged.status == "requires_action", challenged
    assert challenged.next_action.type == "redirect_to_url", challenged.next_action

    events = c.v1.events.list(params={"type": "payment_intent.succeeded", "limit": 100})
    objects = {e.data.object.id for e in events.auto_paging_iter()}
    assert all(isinstance(e.data.object, stripe.PaymentIntent) for e in events.data), events
    assert {pi.id, first.id, held.id, off.id} <= objects, objects

    return {
        "succeeded": [pi.id, first.id, held.id, off.id],
        "refunded_charge": pi.latest_charge,
        "declined_payment_intent": declined.error.payment_intent.id,
    }


class Receiver(http.server.BaseHTTPRequestHandler):
    """Keeps each delivery's raw body and Stripe-Signature header; answers 200."""

    received = []
    arrived = threading.Condition()

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with Receiver.arrived:
            Receiver.received.append((body, self.headers.get("Stripe-Signature")))
            Receiver.arrived.notify_all()
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def webhooks(url):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    c = client(url)
    endpoint = c.v1.webhook_endpoints.create(
        params={
            "url": f"http://127.0.0.1:{server.server_address[1]}/webhooks/stripe",
            "enabled_events": ["payment_intent.succeeded", "charge.succeeded"],
        }
    )
    assert isinstance(endpoint, stripe.WebhookEndpoint) and endpoint.secret.startswith("whsec_"), endpoint
    paid = [c.v1.payment_intents.create(params=charge_params(f"sdk-hook-{n}")).id for n in range(3)]
    expected = 2 * len(paid)
    with Receiver.arrived:
        Receiver.arrived.wait_for(lambda: len(Receiver.received) >= expected, timeout=30)
        received = list(Receiver.received)
    assert len(received) == expected, f"{len(received)} of {expected} deliveries arrived"
    about = {}
    for body, signature in received:
        event = stripe.Webhook.construct_event(body, signature, endpoint.secret)
        assert isinstance(event, stripe.Event), event
        obj = event.data.object
        about.setdefault(event.type, set()).add(obj.id if event.type.startswith("payment_intent") else obj.payment_intent)
        # A body changed on the way, or another endpoint's secret, fails verification.
        for tampered, secret in ((body + b" ", endpoint.secret), (body, "whsec_someone_else")):
            expect_error(
                stripe.SignatureVerificationError,
                lambda: stripe.Webhook.construct_event(tampered, signature, secret),
            )
    assert about == {"payment_intent.succeeded": set(paid), "charge.succeeded": set(paid)}, about
    server.shutdown()
    return {"verified": len(received), "payment_intents": paid}


def retries(url):
    """Against a provider that loses the first two answers for each key after the charge."""
    # The SDK's own retries resend its idempotency key: the third attempt is a replay.
    retrying = client(url, retries=2)
    kept = retrying.v1.payment_intents.create(params=charge_params("sdk-own-retry"))
    assert kept.status == "succeeded", kept
    assert kept.last_response.headers.get("Idempotent-Replayed") == "true", kept.last_response.headers

    # An application that retries around the SDK calls it again, and the SDK makes a new
    # key for each call: every attempt charges.
    once = client(url, retries=0)
    lost = 0
    for _ in range(2):
        error = expect_error(
            stripe.APIConnectionError,
            lambda: once.v1.payment_intents.create(params=charge_params("sdk-app-retry")),
        )
        assert error.should_retry, error
        lost += 1
    return {"kept": kept.id, "lost_answers": lost}


def customer_pays(url, session_id, payment_method, email):
    """What the customer does on the hosted page, as a script does it (fauxpay's pay)."""
    body = urllib.parse.urlencode({"payment_method": payment_method, "email": email}).encode()
    with urllib.request.urlopen(f"{url}/__fauxpay/checkout/sessions/{session_id}/pay", data=body) as resp:
        return json.loads(resp.read())


def checkout(url):
    """Products, prices and a Checkout Session the customer pays; the webhook that says so
    (delivered twice by the profile) checked by the SDK's verifier."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    c = client(url)
    endpoint = c.v1.webhook_endpoints.create(
        params={
            "url": f"http://127.0.0.1:{server.server_address[1]}/webhooks/stripe",
            "enabled_events": ["checkout.session.completed"],
        }
    )
    product = c.v1.products.create(
        params={"name": "T-shirt", "default_price_data": {"currency": "usd", "unit_amount": 1999}}
    )
    assert isinstance(product, stripe.Product) and product.default_price.startswith("price_"), product
    mug = c.v1.prices.create(
        params={"currency": "usd", "unit_amount": 500, "product_data": {"name": "Mug"}, "lookup_key": "sdk-mug"}
    )
    assert isinstance(mug, stripe.Price) and mug.type == "one_time", mug
    assert [p.id for p in c.v1.prices.list(params={"lookup_keys": ["sdk-mug"]}).data] == [mug.id]
    assert c.v1.products.retrieve(product.id, params={"expand": ["default_price"]}).default_price.unit_amount == 1999

    session = c.v1.checkout.sessions.create(
        params={
            "mode": "payment",
            "line_items": [{"price": product.default_price, "quantity": 2}, {"price": mug.id, "quantity": 1}],
            "success_url": "https://shop.example/done?session_id={CHECKOUT_SESSION_ID}",
            "cancel_url": "https://shop.example/cart",
            "metadata": {"order_id": "sdk-cs-1"},
        }
    )
    assert isinstance(session, stripe.checkout.Session), type(session)
    assert session.status == "open" and session.payment_status == "unpaid" and session.payment_intent is None, session
    assert session.amount_total == 2 * 1999 + 500 and session.url.startswith(url), session
    items = c.v1.checkout.sessions.line_items.list(session.id)
    assert [i.quantity for i in items.data] == [2, 1] and items.data[0].description == "T-shirt", items

    paid = customer_pays(url, session.id, "pm_card_visa", "jenny@example.com")
    assert paid["status"] == "complete", paid
    seen = c.v1.checkout.sessions.retrieve(session.id, params={"expand": ["payment_intent"]})
    assert seen.payment_status == "paid" and seen.customer_details.email == "jenny@example.com", seen
    assert isinstance(seen.payment_intent, stripe.PaymentIntent) and seen.payment_intent.status == "succeeded", seen
    assert [s.id for s in c.v1.checkout.sessions.list(params={"payment_intent": seen.payment_intent.id}).data] == [session.id]

    doomed = c.v1.checkout.sessions.create(
        params={"mode": "payment", "line_items": [{"price": mug.id, "quantity": 1}], "success_url": "https://shop.example/done"}
    )
    assert c.v1.checkout.sessions.expire(doomed.id).status == "expired"
    again = expect_error(stripe.InvalidRequestError, lambda: c.v1.checkout.sessions.expire(doomed.id))
    assert again.http_status == 400, again
    recurring = c.v1.prices.create(
        params={"currency": "usd", "unit_amount": 900, "product": product.id, "recurring": {"interval": "month"}}
    )
    refused = expect_error(
        stripe.InvalidRequestError,
        lambda: c.v1.checkout.sessions.create(
            params={"mode": "payment", "line_items": [{"price": recurring.id, "quantity": 1}], "success_url": "https://s.example"}
        ),
    )
    assert refused.param == "line_items[0][price]", refused

    # The profile sends checkout.session.completed twice: both verify, one event.
    with Receiver.arrived:
        Receiver.arrived.wait_for(lambda: len(Receiver.received) >= 2, timeout=30)
        received = list(Receiver.received)
    events = [stripe.Webhook.construct_event(body, sig, endpoint.secret) for body, sig in received]
    assert [e.type for e in events] == ["checkout.session.completed"] * 2, events
    assert len({e.id for e in events}) == 1, "one event, delivered twice"
    completed = events[0].data.object
    assert isinstance(completed, stripe.checkout.Session) and completed.id == session.id, completed
    server.shutdown()
    return {"session": session.id, "payment_intent": seen.payment_intent.id, "deliveries": len(received)}


def browser_key(url):
    """A client made with a publishable key, as a browser's Stripe.js is: it confirms an
    intent with its client_secret, and is refused anything else."""
    server = client(url)
    intent = server.v1.payment_intents.create(
        params={"amount": 1500, "currency": "usd", "metadata": {"order_id": "sdk-pk-1"}}
    )
    browser = stripe.StripeClient("pk_test_fauxpay_python", base_addresses={"api": url})
    card = browser.v1.payment_methods.create(params={"type": "card", "card": {"token": "tok_visa"}})
    assert isinstance(card, stripe.PaymentMethod), card
    seen = browser.v1.payment_intents.retrieve(intent.id, params={"client_secret": intent.client_secret})
    assert seen.status == "requires_payment_method" and "metadata" not in seen, seen
    wrong = expect_error(
        stripe.InvalidRequestError,
        lambda: browser.v1.payment_intents.confirm(
            intent.id, params={"payment_method": card.id, "client_secret": "pi_x_secret_y"}
        ),
    )
    assert wrong.param == "client_secret", wrong
    paid = browser.v1.payment_intents.confirm(
        intent.id, params={"payment_method": card.id, "client_secret": intent.client_secret}
    )
    assert paid.status == "succeeded", paid
    refused = expect_error(stripe.PermissionError, lambda: browser.v1.charges.list())
    assert refused.http_status == 403 and "publishable API key" in refused.user_message, refused
    expect_error(
        stripe.PermissionError,
        lambda: browser.v1.payment_intents.create(params={"amount": 100, "currency": "usd"}),
    )
    return {"payment_intent": paid.id}


FLOWS = {
    "payments": payments,
    "webhooks": webhooks,
    "retries": retries,
    "checkout": checkout,
    "browser_key": browser_key,
}

if __name__ == "__main__":
    flow, url = sys.argv[1], sys.argv[2]
    print(json.dumps(FLOWS[flow](url)))
