// Payment flows written against Stripe's official Node SDK (`stripe` on npm), pointed at
// fauxpay by nothing but the SDK's host, port and protocol.
//
// Run by crates/provider/tests/it/official_sdks.rs as `node flows.cjs FLOW BASE_URL` (NODE_PATH names the
// SDK's install). Each flow asserts what the SDK shows (its objects, its error classes,
// its webhook verifier) and prints one JSON line of what it did, for the Rust test to
// check against the provider's ledger. The same flows as flows.py.

const assert = require("node:assert/strict");
const http = require("node:http");
const Stripe = require("stripe");

const KEY = "sk_test_fauxpay_node";

function client(url, retries = 0, key = KEY) {
  const u = new URL(url);
  return new Stripe(key, {
    host: u.hostname,
    port: Number(u.port),
    protocol: u.protocol.replace(":", ""),
    maxNetworkRetries: retries,
  });
}

function chargeParams(order, extra = {}) {
  return {
    amount: 2000,
    currency: "usd",
    payment_method: "pm_card_visa",
    confirm: true,
    metadata: { order_id: order },
    ...extra,
  };
}

async function expectError(type, call) {
  try {
    await call();
  } catch (e) {
    assert.equal(e.type, type, `${e.type}: ${e.message}`);
    return e;
  }
  throw new assert.AssertionError({ message: `expected ${type}` });
}

async function payments(url) {
  const c = client(url);
  const pi = await c.paymentIntents.create(chargeParams("sdk-1"));
  assert.equal(pi.object, "payment_intent");
  assert.equal(pi.status, "succeeded");
  assert.equal(pi.amount_received, 2000);
  // Every POST carries an idempotency key the SDK made up.
  assert.match(pi.lastResponse.idempotencyKey, /^stripe-node-retry-/);
  assert.match(pi.lastResponse.requestId, /^req_/);
  const charge = await c.charges.retrieve(pi.latest_charge);
  assert.ok(charge.paid && charge.payment_intent === pi.id, JSON.stringify(charge));
  const expanded = await c.paymentIntents.retrieve(pi.id, { expand: ["latest_charge", "payment_method"] });
  assert.equal(expanded.latest_charge.object, "charge");
  assert.equal(expanded.payment_method.card.brand, "visa");

  const declined = await expectError("StripeCardError", () =>
    c.paymentIntents.create(chargeParams("sdk-declined", { payment_method: "pm_card_chargeDeclinedInsufficientFunds" })),
  );
  assert.ok(declined instanceof Stripe.errors.StripeCardError);
  assert.equal(declined.statusCode, 402);
  assert.equal(declined.code, "card_declined");
  assert.equal(declined.decline_code, "insufficient_funds");
  assert.equal(declined.payment_intent.status, "requires_payment_method");
  assert.match(declined.requestId, /^req_/);

  const unknown = await expectError("StripeInvalidRequestError", () =>
    c.paymentIntents.create({ amount: 2000, currency: "usd", bogus: 1 }),
  );
  assert.equal(unknown.statusCode, 400);
  assert.equal(unknown.param, "bogus");
  const missing = await expectError("StripeInvalidRequestError", () => c.paymentIntents.create({ currency: "usd" }));
  assert.equal(missing.param, "amount");
  const unauthorized = await expectError("StripeAuthenticationError", () =>
    client(url, 0, "not-a-key").customers.list(),
  );
  assert.equal(unauthorized.statusCode, 401);

  // A key given by the caller: the second call is a replay; other parameters are refused.
  const key = { idempotencyKey: "node-order-2-attempt" };
  const first = await c.paymentIntents.create(chargeParams("sdk-2", { amount: 700 }), key);
  const again = await c.paymentIntents.create(chargeParams("sdk-2", { amount: 700 }), key);
  assert.equal(again.id, first.id);
  assert.equal(again.lastResponse.headers["idempotent-replayed"], "true");
  const reused = await expectError("StripeIdempotencyError", () =>
    c.paymentIntents.create(chargeParams("sdk-2", { amount: 701 }), key),
  );
  assert.equal(reused.statusCode, 400);

  const refund = await c.refunds.create({ payment_intent: pi.id, amount: 500 });
  assert.equal(refund.object, "refund");
  assert.equal(refund.status, "succeeded");
  assert.equal((await c.charges.retrieve(pi.latest_charge)).amount_refunded, 500);
  const noted = await c.refunds.update(refund.id, { metadata: { ticket: "T-1" } });
  assert.deepEqual(noted.metadata, { ticket: "T-1" });
  const updated = await c.charges.update(pi.latest_charge, { description: "order sdk-1", metadata: { shipped: "no" } });
  assert.equal(updated.description, "order sdk-1");
  assert.deepEqual(updated.metadata, { order_id: "sdk-1", shipped: "no" });

  const held = await c.paymentIntents.create(chargeParams("sdk-3", { amount: 900, capture_method: "manual" }));
  assert.equal(held.status, "requires_capture");
  const captured = await c.paymentIntents.capture(held.id, { amount_to_capture: 600 });
  assert.equal(captured.status, "succeeded");
  assert.equal(captured.amount_received, 600);

  const abandoned = await c.paymentIntents.create({ amount: 900, currency: "usd" });
  assert.equal(abandoned.status, "requires_payment_method");
  assert.equal((await c.paymentIntents.cancel(abandoned.id)).status, "canceled");

  // Lists page through with the SDK's own auto-pagination; search finds by metadata.
  const listed = [];
  for await (const p of c.paymentIntents.list({ limit: 2 })) listed.push(p.id);
  assert.equal(new Set(listed).size, listed.length);
  for (const id of [pi.id, first.id, held.id, abandoned.id]) assert.ok(listed.includes(id), id);
  const found = await c.paymentIntents.search({ query: "metadata['order_id']:'sdk-1'" });
  assert.deepEqual(found.data.map((p) => p.id), [pi.id]);

  // A saved card: customer, setup intent for off-session use, then an off-session charge.
  const customer = await c.customers.create({ email: "jenny@example.com" });
  const setup = await c.setupIntents.create({
    customer: customer.id,
    payment_method: "pm_card_visa",
    confirm: true,
    usage: "off_session",
  });
  assert.equal(setup.status, "succeeded");
  assert.equal((await c.setupIntents.update(setup.id, { metadata: { plan: "pro" } })).metadata.plan, "pro");
  const saved = await c.customers.listPaymentMethods(customer.id);
  assert.deepEqual(saved.data.map((p) => p.id), [setup.payment_method]);
  const one = await c.customers.retrievePaymentMethod(customer.id, setup.payment_method);
  assert.equal(one.customer, customer.id);
  const off = await c.paymentIntents.create(
    chargeParams("sdk-4", { amount: 1234, payment_method: setup.payment_method, customer: customer.id, off_session: true }),
  );
  assert.equal(off.status, "succeeded");
  assert.equal(off.customer, customer.id);

  const challenged = await c.paymentIntents.create(
    chargeParams("sdk-5", { payment_method: "pm_card_threeDSecure2Required", return_url: "https://example.com/done" }),
  );
  assert.equal(challenged.status, "requires_action");
  assert.equal(challenged.next_action.type, "redirect_to_url");

  const objects = new Set();
  for await (const e of c.events.list({ type: "payment_intent.succeeded", limit: 100 })) {
    assert.equal(e.data.object.object, "payment_intent");
    objects.add(e.data.object.id);
  }
  for (const id of [pi.id, first.id, held.id, off.id]) assert.ok(objects.has(id), id);

  return {
    succeeded: [pi.id, first.id, held.id, off.id],
    refunded_charge: pi.latest_charge,
    declined_payment_intent: declined.payment_intent.id,
  };
}

// A webhook receiver on a free port: its URL, what it received ([body, signature]), and
// a wait for `n` deliveries (at most 30 s).
async function receiver() {
  const received = [];
  let arrived = () => {};
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      received.push([Buffer.concat(chunks), req.headers["stripe-signature"]]);
      res.writeHead(200, { "content-length": 0 }).end();
      arrived();
    });
  });
  await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
  const waitFor = (n) =>
    new Promise((ok) => {
      const timer = setTimeout(ok, 30_000);
      arrived = () => received.length >= n && (clearTimeout(timer), ok());
      arrived();
    });
  return { url: `http://127.0.0.1:${server.address().port}/webhooks/stripe`, received, waitFor, server };
}

async function webhooks(url) {
  const hooks = await receiver();
  const c = client(url);
  const endpoint = await c.webhookEndpoints.create({
    url: hooks.url,
    enabled_events: ["payment_intent.succeeded", "charge.succeeded"],
  });
  assert.match(endpoint.secret, /^whsec_/);
  const paid = [];
  for (let n = 0; n < 3; n++) paid.push((await c.paymentIntents.create(chargeParams(`sdk-hook-${n}`))).id);
  const expected = 2 * paid.length;
  await hooks.waitFor(expected);
  const received = hooks.received;
  assert.equal(received.length, expected, `${received.length} of ${expected} deliveries arrived`);
  const about = { "payment_intent.succeeded": new Set(), "charge.succeeded": new Set() };
  for (const [body, signature] of received) {
    const event = c.webhooks.constructEvent(body, signature, endpoint.secret);
    const obj = event.data.object;
    about[event.type].add(event.type.startsWith("payment_intent") ? obj.id : obj.payment_intent);
    // A body changed on the way, or another endpoint's secret, fails verification.
    for (const [tampered, secret] of [
      [Buffer.concat([body, Buffer.from(" ")]), endpoint.secret],
      [body, "whsec_someone_else"],
    ]) {
      assert.throws(() => c.webhooks.constructEvent(tampered, signature, secret), Stripe.errors.StripeSignatureVerificationError);
    }
  }
  for (const ids of Object.values(about)) assert.deepEqual([...ids].sort(), [...paid].sort());
  hooks.server.close();
  return { verified: received.length, payment_intents: paid };
}

async function retries(url) {
  // Against a provider that loses the first two answers for each key after the charge.
  // The SDK's own retries resend its idempotency key: the third attempt is a replay.
  const kept = await client(url, 2).paymentIntents.create(chargeParams("sdk-own-retry"));
  assert.equal(kept.status, "succeeded");
  assert.equal(kept.lastResponse.headers["idempotent-replayed"], "true");

  // An application that retries around the SDK calls it again, and the SDK makes a new
  // key for each call: every call charges. (With retries off the Node SDK still retries
  // a closed connection once, with the same key, so each call makes two attempts.)
  const once = client(url, 0);
  let lost = 0;
  for (let n = 0; n < 2; n++) {
    await expectError("StripeConnectionError", () => once.paymentIntents.create(chargeParams("sdk-app-retry")));
    lost += 1;
  }
  return { kept: kept.id, lost_answers: lost };
}

// What the customer does on the hosted page, as a script does it (fauxpay's pay).
async function customerPays(url, session, paymentMethod, email) {
  const resp = await fetch(`${url}/__fauxpay/checkout/sessions/${session}/pay`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ payment_method: paymentMethod, email }),
  });
  assert.equal(resp.status, 200);
  return resp.json();
}

// Products, prices and a Checkout Session the customer pays; the webhook that says so
// (delivered twice by the profile) checked by the SDK's verifier.
async function checkout(url) {
  const hooks = await receiver();
  const c = client(url);
  const endpoint = await c.webhookEndpoints.create({ url: hooks.url, enabled_events: ["checkout.session.completed"] });
  const product = await c.products.create({
    name: "T-shirt",
    default_price_data: { currency: "usd", unit_amount: 1999 },
  });
  assert.equal(product.object, "product");
  assert.match(product.default_price, /^price_/);
  const mug = await c.prices.create({ currency: "usd", unit_amount: 500, product_data: { name: "Mug" }, lookup_key: "sdk-mug" });
  assert.equal(mug.type, "one_time");
  assert.deepEqual((await c.prices.list({ lookup_keys: ["sdk-mug"] })).data.map((p) => p.id), [mug.id]);
  assert.equal((await c.products.retrieve(product.id, { expand: ["default_price"] })).default_price.unit_amount, 1999);

  const session = await c.checkout.sessions.create({
    mode: "payment",
    line_items: [
      { price: product.default_price, quantity: 2 },
      { price: mug.id, quantity: 1 },
    ],
    success_url: "https://shop.example/done?session_id={CHECKOUT_SESSION_ID}",
    cancel_url: "https://shop.example/cart",
    metadata: { order_id: "sdk-cs-1" },
  });
  assert.equal(session.object, "checkout.session");
  assert.equal(session.status, "open");
  assert.equal(session.payment_intent, null);
  assert.equal(session.amount_total, 2 * 1999 + 500);
  assert.ok(session.url.startsWith(url), session.url);
  const items = await c.checkout.sessions.listLineItems(session.id);
  assert.deepEqual(items.data.map((i) => i.quantity), [2, 1]);
  assert.equal(items.data[0].description, "T-shirt");

  const paid = await customerPays(url, session.id, "pm_card_visa", "jenny@example.com");
  assert.equal(paid.status, "complete");
  const seen = await c.checkout.sessions.retrieve(session.id, { expand: ["payment_intent"] });
  assert.equal(seen.payment_status, "paid");
  assert.equal(seen.customer_details.email, "jenny@example.com");
  assert.equal(seen.payment_intent.status, "succeeded");
  const listed = await c.checkout.sessions.list({ payment_intent: seen.payment_intent.id });
  assert.deepEqual(listed.data.map((s) => s.id), [session.id]);

  const doomed = await c.checkout.sessions.create({
    mode: "payment",
    line_items: [{ price: mug.id, quantity: 1 }],
    success_url: "https://shop.example/done",
  });
  assert.equal((await c.checkout.sessions.expire(doomed.id)).status, "expired");
  const again = await expectError("StripeInvalidRequestError", () => c.checkout.sessions.expire(doomed.id));
  assert.equal(again.statusCode, 400);
  const recurring = await c.prices.create({ currency: "usd", unit_amount: 900, product: product.id, recurring: { interval: "month" } });
  const refused = await expectError("StripeInvalidRequestError", () =>
    c.checkout.sessions.create({ mode: "payment", line_items: [{ price: recurring.id, quantity: 1 }], success_url: "https://s.example" }),
  );
  assert.equal(refused.param, "line_items[0][price]");

  // The profile sends checkout.session.completed twice: both verify, one event.
  await hooks.waitFor(2);
  const events = hooks.received.map(([body, sig]) => c.webhooks.constructEvent(body, sig, endpoint.secret));
  assert.deepEqual(events.map((e) => e.type), ["checkout.session.completed", "checkout.session.completed"]);
  assert.equal(new Set(events.map((e) => e.id)).size, 1, "one event, delivered twice");
  assert.equal(events[0].data.object.id, session.id);
  hooks.server.close();
  return { session: session.id, payment_intent: seen.payment_intent.id, deliveries: hooks.received.length };
}

// A client made with a publishable key, as a browser's Stripe.js is: it confirms an
// intent with its client_secret, and is refused anything else.
async function browserKey(url) {
  const server = client(url);
  const intent = await server.paymentIntents.create({ amount: 1500, currency: "usd", metadata: { order_id: "sdk-pk-1" } });
  const browser = client(url, 0, "pk_test_fauxpay_node");
  const card = await browser.paymentMethods.create({ type: "card", card: { token: "tok_visa" } });
  assert.equal(card.object, "payment_method");
  const seen = await browser.paymentIntents.retrieve(intent.id, { client_secret: intent.client_secret });
  assert.equal(seen.status, "requires_payment_method");
  assert.equal(seen.metadata, undefined);
  const wrong = await expectError("StripeInvalidRequestError", () =>
    browser.paymentIntents.confirm(intent.id, { payment_method: card.id, client_secret: "pi_x_secret_y" }),
  );
  assert.equal(wrong.param, "client_secret");
  const paid = await browser.paymentIntents.confirm(intent.id, { payment_method: card.id, client_secret: intent.client_secret });
  assert.equal(paid.status, "succeeded");
  const refused = await expectError("StripePermissionError", () => browser.charges.list());
  assert.equal(refused.statusCode, 403);
  assert.match(refused.message, /publishable API key/);
  await expectError("StripePermissionError", () => browser.paymentIntents.create({ amount: 100, currency: "usd" }));
  return { payment_intent: paid.id };
}

const FLOWS = { payments, webhooks, retries, checkout, browser_key: browserKey };
const [flow, url] = process.argv.slice(2);
FLOWS[flow](url).then(
  (seen) => console.log(JSON.stringify(seen)),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
