// The shop's browser code, written against Stripe.js as a storefront writes it. The only
// fauxpay-specific line is where Stripe.js is loaded from: `${fauxpay}/v3/` instead of
// https://js.stripe.com/v3/ (see docs/stripe-js.md for the other ways to switch).
"use strict";

window.storefront = (function () {
  const config = window.STOREFRONT;

  /** Loads Stripe.js (fauxpay's stand-in), then resolves `Stripe(publishableKey)`. */
  function loadStripe() {
    return new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = `${config.fauxpay}/v3/`;
      script.onload = () => resolve(window.Stripe(config.publishableKey));
      script.onerror = () => reject(new Error("Stripe.js could not be loaded"));
      document.head.appendChild(script);
    });
  }

  function say(text, kind) {
    const message = document.getElementById("message");
    message.textContent = text;
    message.dataset.kind = kind;
  }

  async function post(path) {
    const resp = await fetch(path, { method: "POST" });
    if (!resp.ok) {
      const body = await resp.json().catch(() => ({}));
      throw new Error(body.message || `${path}: ${resp.status}`);
    }
    return resp.json();
  }

  /** Payment Element: the server makes the intent, the browser confirms it. */
  async function paymentPage() {
    let stripe, order, clientSecret;
    try {
      [stripe, { order, clientSecret }] = await Promise.all([loadStripe(), post("/api/payment-intents")]);
    } catch (e) {
      return say(`The shop could not start the payment: ${e.message}. Reload to try again.`, "error");
    }
    document.getElementById("order").textContent = order;
    const elements = stripe.elements({ clientSecret });
    const payment = elements.create("payment");
    payment.mount("#payment-element");
    const button = document.getElementById("submit");
    payment.on("ready", () => (button.disabled = false));
    document.getElementById("payment-form").addEventListener("submit", async (event) => {
      event.preventDefault();
      button.disabled = true;
      say("Paying…", "pending");
      const { error, paymentIntent } = await stripe.confirmPayment({
        elements,
        confirmParams: { return_url: `${location.origin}/done.html?order=${order}` },
        redirect: "if_required",
      });
      if (error && error.type === "api_connection_error") {
        // The answer was lost: the payment may have gone through. Ask, never guess.
        const { paymentIntent: known } = await stripe.retrievePaymentIntent(clientSecret);
        if (known && known.status === "succeeded") return say(`Payment succeeded: ${known.id}`, "ok");
      }
      if (error) {
        say(error.message, "error");
        button.disabled = false;
        return;
      }
      say(`Payment succeeded: ${paymentIntent.id}`, "ok");
    });
  }

  /** Checkout: the server makes a session, the browser goes to its page. */
  function checkoutButton(button) {
    button.addEventListener("click", async () => {
      button.disabled = true;
      let stripe, session;
      try {
        [stripe, session] = await Promise.all([loadStripe(), post("/api/checkout-sessions")]);
      } catch (e) {
        say(`The shop could not start the payment: ${e.message}`, "error");
        button.disabled = false;
        return;
      }
      const { error } = await stripe.redirectToCheckout({ sessionId: session.id });
      if (error) {
        say(error.message, "error");
        button.disabled = false;
      }
    });
  }

  /** Where the customer lands after paying elsewhere (3-D Secure redirect, Checkout). */
  function donePage() {
    const query = new URLSearchParams(location.search);
    const session = query.get("session_id");
    const status = query.get("redirect_status");
    if (session) say(`Paid with Checkout: ${session} (order ${query.get("order")})`, "ok");
    else if (status === "succeeded") say(`Payment succeeded: ${query.get("payment_intent")}`, "ok");
    else say(`The payment did not go through (${status}).`, "error");
  }

  return { paymentPage, checkoutButton, donePage };
})();
