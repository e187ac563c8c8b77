// The Stripe.js stand-in's API surface against Stripe's published TypeScript types
// (`@stripe/stripe-js`): every function the stand-in defines on `Stripe(pk)`, on an
// Elements group and on an Element is declared in the types (bar the older names the
// types dropped, which Stripe.js still serves), the fields of its results and errors are
// the types' own, and `loadStripe` resolves to the stand-in once it is on the page.
//
// Run by crates/provider/tests/it/stripe_js.rs as
// `node surface.cjs STAND_IN_SCRIPT STRIPE_JS_PACKAGE_DIR`; prints one JSON line.

const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const vm = require("node:vm");

const [script, pkg] = process.argv.slice(2);
const types = path.join(pkg, "dist", "stripe-js");
const read = (file) => fs.readFileSync(path.join(types, file), "utf8");

// What a page with the stand-in loaded has (no DOM is touched until an element mounts).
global.window = { location: { href: "http://127.0.0.1:1/", origin: "http://127.0.0.1:1" } };
global.document = { currentScript: { src: "http://127.0.0.1:1/v3/" } };
vm.runInThisContext(fs.readFileSync(script, "utf8"));
const stripe = window.Stripe("pk_test_surface");
const elements = stripe.elements({ clientSecret: "pi_1_secret_2" });
const element = elements.create("payment");
const ours = (o) => Object.keys(o).filter((k) => !k.startsWith("_") && typeof o[k] === "function");

/** The method names an interface (or type literal) declares at its top level. */
function methods(text, opener) {
  const start = text.indexOf(opener);
  assert.ok(start >= 0, `no ${opener}`);
  const names = new Set();
  let depth = 0;
  for (const line of text.slice(start).split("\n")) {
    const m = depth === 1 && line.match(/^\s{2}(\w+)\??\(/);
    if (m) names.add(m[1]);
    depth += (line.match(/{/g) || []).length - (line.match(/}/g) || []).length;
    if (depth === 0 && names.size > 0) break;
  }
  return names;
}

const stripeTypes = methods(read("stripe.d.ts"), "export interface Stripe {");
// Older names Stripe.js v3 still serves and the types no longer declare.
const LEGACY = ["redirectToCheckout", "handleCardSetup"];
for (const name of ours(stripe)) {
  assert.ok(stripeTypes.has(name) || LEGACY.includes(name), `Stripe.${name} is not in @stripe/stripe-js's types`);
}
const groupTypes = methods(read("elements-group.d.ts"), "export interface StripeElements {");
for (const name of ours(elements)) assert.ok(groupTypes.has(name), `StripeElements.${name} is not in the types`);
const elementText = fs
  .readdirSync(path.join(types, "elements"))
  .filter((f) => f.endsWith(".d.ts"))
  .map((f) => fs.readFileSync(path.join(types, "elements", f), "utf8"))
  .join("\n");
for (const name of ours(element)) {
  assert.match(elementText, new RegExp(`^\\s+${name}\\(`, "m"), `an Element's ${name} is not in the types`);
}

// The fields results and errors carry.
const all = read("stripe.d.ts") + read("payment-intents.d.ts") + read("setup-intents.d.ts");
const errorFields = methods(all.replace(/^(\s+)(\w+)\??:/gm, "$1$2("), "export interface StripeError {");
for (const field of ["type", "code", "decline_code", "message", "param", "payment_intent", "setup_intent"]) {
  assert.ok(errorFields.has(field), `StripeError.${field} is not in the types`);
}
for (const result of ["paymentIntent", "setupIntent", "paymentMethod", "error"]) {
  assert.match(all, new RegExp(`\\b${result}\\??: `), `a result's ${result} is not in the types`);
}

// A test runner serving the stand-in under Stripe's URL names fauxpay beforehand.
window.Stripe = undefined;
window.FAUXPAY_API_BASE = "http://127.0.0.1:12111";
document.currentScript = { src: "https://js.stripe.com/v3/" };
vm.runInThisContext(fs.readFileSync(script, "utf8"));
assert.equal(window.Stripe.fauxpay.apiBase, "http://127.0.0.1:12111");

// loadStripe finds the stand-in already on the page and resolves to it.
const { loadStripe } = require(pkg);
const warn = console.warn;
console.warn = () => {};
loadStripe("pk_test_surface").then((loaded) => {
  console.warn = warn;
  assert.equal(typeof loaded.confirmPayment, "function");
  console.log(JSON.stringify({ stripe: ours(stripe), elements: ours(elements), element: ours(element) }));
});
