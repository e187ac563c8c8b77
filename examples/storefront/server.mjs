// An example storefront's server: the merchant half of a Stripe integration, written the
// way a shop writes it, pointed at fauxpay. Node 18 or later, no dependencies.
//
//   FAUXPAY_URL=http://127.0.0.1:12111 node examples/storefront/server.mjs
//
// It serves the shop's pages (this folder), creates payment intents and Checkout
// Sessions with its secret key, registers its webhook endpoint with the provider on
// start, verifies each delivery's Stripe-Signature, and fulfils each order once (it counts
// the deliveries too, so a test can see a duplicate webhook arrive and change nothing).
//
// Settings (environment): FAUXPAY_URL (the provider, default http://127.0.0.1:12111),
// SECRET_KEY (sk_test_storefront), PUBLISHABLE_KEY (pk_test_storefront), PORT (4242; 0
// picks a free one), HOST (127.0.0.1). It prints one line, `storefront listening on URL`.

import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { readFile } from "node:fs/promises";
import { createServer } from "node:http";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const provider = (process.env.FAUXPAY_URL || "http://127.0.0.1:12111").replace(/\/$/, "");
const secretKey = process.env.SECRET_KEY || "sk_test_storefront";
const publishableKey = process.env.PUBLISHABLE_KEY || "pk_test_storefront";
const PRICE = { name: "T-shirt", amount: 1999, currency: "usd" };
const PAGES = { "/": "index.html", "/index.html": "index.html", "/payment.html": "payment.html", "/done.html": "done.html", "/storefront.js": "storefront.js" };
const MAX_BODY = 64 * 1024;

/** The orders this shop took: id → {fulfilled, deliveries}. */
const orders = new Map();
let webhookSecret = null;

/** A call to the provider's API with the secret key (a form body, Stripe's bracket notation). */
async function api(method, path, form) {
  const resp = await fetch(`${provider}${path}`, {
    method,
    headers: { authorization: `Bearer ${secretKey}`, "content-type": "application/x-www-form-urlencoded" },
    body: form ? new URLSearchParams(form) : undefined,
  });
  const body = await resp.json();
  if (!resp.ok) throw new Error(`${method} ${path}: ${resp.status} ${body.error?.message}`);
  return body;
}

function newOrder() {
  const id = `order-${randomBytes(6).toString("hex")}`;
  orders.set(id, { fulfilled: false, deliveries: 0 });
  return id;
}

/** Stripe's signature check: t=…,v1=HMAC-SHA256(secret, `${t}.${body}`), within 5 minutes. */
function verified(body, header) {
  const parts = Object.fromEntries((header || "").split(",").map((kv) => kv.split("=", 2)));
  if (!parts.t || !parts.v1 || !webhookSecret) return false;
  if (Math.abs(Date.now() / 1000 - Number(parts.t)) > 300) return false;
  const expected = createHmac("sha256", webhookSecret).update(`${parts.t}.${body}`).digest();
  const given = Buffer.from(parts.v1, "hex");
  return given.length === expected.length && timingSafeEqual(given, expected);
}

async function readBody(req) {
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > MAX_BODY) throw new Error("body too large");
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

function send(res, status, body, type = "application/json") {
  const text = type === "application/json" ? JSON.stringify(body) : body;
  res.writeHead(status, { "content-type": `${type}; charset=utf-8`, "cache-control": "no-store" });
  res.end(text);
}

async function route(req, res, origin) {
  const url = new URL(req.url, origin);
  if (req.method === "GET" && PAGES[url.pathname]) {
    const file = PAGES[url.pathname];
    const type = file.endsWith(".js") ? "application/javascript" : "text/html";
    return send(res, 200, await readFile(join(here, file), "utf8"), type);
  }
  if (req.method === "GET" && url.pathname === "/config.js") {
    const config = { fauxpay: provider, publishableKey, price: PRICE };
    return send(res, 200, `window.STOREFRONT = ${JSON.stringify(config)};\n`, "application/javascript");
  }
  if (req.method === "POST" && url.pathname === "/api/payment-intents") {
    // Payment Element: the server makes the intent; the browser confirms it.
    const order = newOrder();
    const intent = await api("POST", "/v1/payment_intents", {
      amount: PRICE.amount,
      currency: PRICE.currency,
      "metadata[order_id]": order,
    });
    return send(res, 200, { order, clientSecret: intent.client_secret });
  }
  if (req.method === "POST" && url.pathname === "/api/checkout-sessions") {
    // Checkout: the server makes a session; the browser goes to its page.
    const order = newOrder();
    const session = await api("POST", "/v1/checkout/sessions", {
      mode: "payment",
      "line_items[0][price_data][currency]": PRICE.currency,
      "line_items[0][price_data][unit_amount]": PRICE.amount,
      "line_items[0][price_data][product_data][name]": PRICE.name,
      "line_items[0][quantity]": 1,
      success_url: `${origin}/done.html?session_id={CHECKOUT_SESSION_ID}&order=${order}`,
      cancel_url: `${origin}/`,
      "metadata[order_id]": order,
      "payment_intent_data[metadata][order_id]": order,
    });
    return send(res, 200, { order, id: session.id, url: session.url });
  }
  if (req.method === "GET" && url.pathname.startsWith("/api/orders/")) {
    const id = decodeURIComponent(url.pathname.slice("/api/orders/".length));
    const order = orders.get(id);
    return order ? send(res, 200, { id, ...order }) : send(res, 404, { error: "no such order" });
  }
  if (req.method === "POST" && url.pathname === "/webhooks/stripe") {
    const body = await readBody(req);
    if (!verified(body, req.headers["stripe-signature"])) return send(res, 400, { error: "bad signature" });
    const event = JSON.parse(body);
    const order = orders.get(event.data?.object?.metadata?.order_id);
    if (event.type === "payment_intent.succeeded" && order) {
      // Stripe delivers at least once: count every delivery, fulfil once.
      order.deliveries += 1;
      order.fulfilled = true;
    }
    return send(res, 200, { received: true });
  }
  return send(res, 404, { error: "not found" });
}

const server = createServer((req, res) => {
  const origin = `http://${req.headers.host}`;
  route(req, res, origin).catch((e) => send(res, 500, { error: String(e.message || e) }));
});
server.listen(Number(process.env.PORT ?? 4242), process.env.HOST || "127.0.0.1", async () => {
  const { address, port } = server.address();
  const url = `http://${address}:${port}`;
  const endpoint = await api("POST", "/v1/webhook_endpoints", {
    url: `${url}/webhooks/stripe`,
    "enabled_events[0]": "payment_intent.succeeded",
  });
  webhookSecret = endpoint.secret;
  console.log(`storefront listening on ${url}`);
});
