/*
 * fauxpay's stand-in for Stripe.js v3 (https://js.stripe.com/v3/), served by fauxpay at
 * GET /v3/ and GET /js.stripe.com/v3/. Plain ES2017, no dependencies, no external assets.
 *
 * Where it talks: the origin of the URL this script was loaded from
 * (document.currentScript.src, e.g. http://127.0.0.1:12111), falling back to the page's
 * own origin. fauxpay extensions: window.FAUXPAY_API_BASE, set before the script loads
 * (for a test runner that serves it under js.stripe.com's URL), and
 * Stripe(pk, {apiBase: 'http://host:port'}) override it.
 * Every call is a fetch with `Authorization: Bearer <publishable key>` and a form body
 * in Stripe's bracket notation; no Idempotency-Key is ever sent (Stripe.js sends none).
 *
 * What it covers: window.Stripe(pk, options) with elements() (the 'payment' and 'card'
 * Elements, both one plain card form: number, expiry, CVC, postal code), confirmPayment,
 * confirmCardPayment, confirmSetup, confirmCardSetup, createPaymentMethod,
 * retrievePaymentIntent, retrieveSetupIntent, handleNextAction, handleCardAction,
 * handleCardSetup and redirectToCheckout. 3-D Secure opens fauxpay's authentication page
 * in a modal <iframe> and polls the intent until it leaves `requires_action`.
 *
 * What it does not: wallets (Apple Pay, Google Pay, paymentRequest, the Express Checkout
 * and Payment Request Button Elements), Link, payment method types other than cards,
 * tokens/sources, and Stripe's one-iframe-per-field isolation (the form is rendered
 * straight into the page's DOM: class `fauxpay-element`, inputs `.fauxpay-input`).
 *
 * Confirms are never retried: without an idempotency key a second confirm would run
 * again. When one fails with `api_connection_error` the page should retrieve the intent
 * (retrievePaymentIntent / retrieveSetupIntent) to learn what actually happened.
 */
(function () {
  'use strict';

  if (typeof window === 'undefined') return;
  // Loaded twice: keep the first copy of ours (a foreign window.Stripe is replaced).
  if (typeof window.Stripe === 'function' && window.Stripe.fauxpay) return;

  var SCRIPT_BASE = (function () {
    // fauxpay extension: a test runner that serves this script under Stripe's own URL
    // (https://js.stripe.com/v3/) says where fauxpay is before the page loads it.
    if (typeof window.FAUXPAY_API_BASE === 'string') return window.FAUXPAY_API_BASE;
    try {
      var script = document.currentScript;
      if (script && script.src) return new URL(script.src, window.location.href).origin;
    } catch (e) { /* fall through */ }
    return window.location.origin;
  })();

  var POLL_MS = 250;
  var POLL_LIMIT_MS = 10 * 60 * 1000;

  // What differs between payment intents and setup intents.
  var KINDS = {
    payment: {
      prefix: 'pi_', path: '/v1/payment_intents/', result: 'paymentIntent',
      errorKey: 'payment_intent', lastError: 'last_payment_error',
      done: ['succeeded', 'processing', 'requires_capture'], noun: 'PaymentIntent'
    },
    setup: {
      prefix: 'seti_', path: '/v1/setup_intents/', result: 'setupIntent',
      errorKey: 'setup_intent', lastError: 'last_setup_error',
      done: ['succeeded', 'processing'], noun: 'SetupIntent'
    }
  };

  // ---------------------------------------------------------------------------------
  // Pure helpers: form encoding, card validation, formatting.

  /** Stripe's bracket notation: {a: {b: 1}, c: ['x']} → "a[b]=1&c[0]=x". Skips null/undefined. */
  function encodeForm(params) {
    var parts = [];
    function add(key, value) {
      if (value === undefined || value === null) return;
      if (Array.isArray(value)) {
        value.forEach(function (v, i) { add(key + '[' + i + ']', v); });
      } else if (typeof value === 'object') {
        Object.keys(value).forEach(function (k) {
          add(key ? key + '[' + encodeURIComponent(k) + ']' : encodeURIComponent(k), value[k]);
        });
      } else {
        parts.push(key + '=' + encodeURIComponent(String(value)));
      }
    }
    add('', params || {});
    return parts.join('&');
  }

  function digitsOf(s) { return String(s || '').replace(/\D/g, ''); }

  function luhn(digits) {
    var sum = 0;
    for (var i = 0; i < digits.length; i++) {
      var d = digits.charCodeAt(digits.length - 1 - i) - 48;
      if (i % 2 === 1) { d *= 2; if (d > 9) d -= 9; }
      sum += d;
    }
    return digits.length > 0 && sum % 10 === 0;
  }

  /** American Express numbers (34…, 37…) have 15 digits; every other test card 16. */
  function numberLength(digits) { return /^3[47]/.test(digits) ? 15 : 16; }

  function fieldError(code, message, definite) {
    return { type: 'validation_error', code: code, message: message, definite: !!definite };
  }

  function checkNumber(value) {
    var d = digitsOf(value);
    if (d.length < numberLength(d)) return fieldError('incomplete_number', 'Your card number is incomplete.');
    if (!luhn(d)) return fieldError('invalid_number', 'Your card number is invalid.', true);
    return null;
  }

  /** "MM / YY" → {month, year (4 digits)}, or null while incomplete. */
  function parseExpiry(value) {
    var d = digitsOf(value);
    if (d.length !== 4) return null;
    return { month: parseInt(d.slice(0, 2), 10), year: 2000 + parseInt(d.slice(2), 10) };
  }

  function checkExpiry(value, now) {
    var e = parseExpiry(value);
    if (!e) return fieldError('incomplete_expiry', "Your card's expiration date is incomplete.");
    if (e.month < 1 || e.month > 12) {
      return fieldError('invalid_expiry_month', "Your card's expiration month is invalid.", true);
    }
    now = now || new Date();
    var year = now.getFullYear(), month = now.getMonth() + 1;
    if (e.year < year) return fieldError('invalid_expiry_year_past', "Your card's expiration year is in the past.", true);
    if (e.year === year && e.month < month) {
      return fieldError('invalid_expiry_month_past', "Your card's expiration date is in the past.", true);
    }
    if (e.year > year + 50) return fieldError('invalid_expiry_year', "Your card's expiration year is invalid.", true);
    return null;
  }

  function checkCvc(value) {
    return digitsOf(value).length < 3 ? fieldError('incomplete_cvc', "Your card's security code is incomplete.") : null;
  }

  function checkPostal(value) {
    return String(value || '').trim() === '' ? fieldError('incomplete_zip', 'Your postal code is incomplete.') : null;
  }

  var CHECKS = { number: checkNumber, expiry: checkExpiry, cvc: checkCvc, postal: checkPostal };

  /** Groups of four as typed, cut at the card's length. */
  function formatNumber(value) {
    var d = digitsOf(value);
    d = d.slice(0, numberLength(d));
    return d.replace(/(\d{4})(?=\d)/g, '$1 ');
  }

  /** "MM / YY" as typed; `deleting`: do not append the " / " after a lone month. */
  function formatExpiry(value, deleting) {
    var long = /^\s*(\d{1,2})\s*\/\s*\d{2}(\d{2})\s*$/.exec(value); // pasted "12/2034"
    var d = long ? ('0' + long[1]).slice(-2) + long[2] : digitsOf(value).slice(0, 4);
    if (d.length === 1 && d > '1') d = '0' + d;
    if (d.length < 2) return d;
    if (d.length === 2) return deleting ? d : d + ' / ';
    return d.slice(0, 2) + ' / ' + d.slice(2);
  }

  /** The caret position in `formatted` just after its `n`th digit. */
  function caretAfterDigits(formatted, n) {
    if (n === 0) return 0;
    for (var i = 0, seen = 0; i < formatted.length; i++) {
      if (/\d/.test(formatted[i]) && ++seen === n) return i + 1;
    }
    return formatted.length;
  }

  function stripDefinite(err) {
    return err ? { type: err.type, code: err.code, message: err.message } : undefined;
  }

  function validationResult(err) { return { error: stripDefinite(err) }; }

  function invalidRequest(message, param) {
    var e = { type: 'invalid_request_error', message: message };
    if (param) e.param = param;
    return { error: e };
  }

  function sleep(ms) { return new Promise(function (resolve) { setTimeout(resolve, ms); }); }

  function never() { return new Promise(function () {}); }

  /** `url` with `params` added to its query, before any fragment. */
  function withQuery(url, params) {
    var hash = '', i = url.indexOf('#');
    if (i >= 0) { hash = url.slice(i); url = url.slice(0, i); }
    return url + (url.indexOf('?') >= 0 ? '&' : '?') + encodeForm(params) + hash;
  }

  function secretKind(secret) {
    if (typeof secret !== 'string') return null;
    if (secret.indexOf('seti_') === 0) return 'setup';
    if (secret.indexOf('pi_') === 0) return 'payment';
    return null;
  }

  /** The intent id of a client secret ("pi_X_secret_Y" → "pi_X"), or null. */
  function intentId(secret, kind) {
    if (typeof secret !== 'string' || secretKind(secret) !== kind) return null;
    var i = secret.indexOf('_secret_');
    return i > 0 ? secret.slice(0, i) : null;
  }

  function badSecret(kind) {
    return invalidRequest('Invalid value for client secret: expected the client_secret of a ' +
      KINDS[kind].noun + ' (' + KINDS[kind].prefix + '…_secret_…).', 'client_secret');
  }

  // ---------------------------------------------------------------------------------
  // The wire.

  function Api(base, key) {
    this.base = base;
    this.key = key;
  }

  /** Resolves {body} on 2xx, else {error} (the API's, or an api_connection_error). Never rejects on I/O. */
  Api.prototype.call = async function (method, path, params) {
    var url = this.base + path;
    var body = encodeForm(params);
    var init = {
      method: method,
      credentials: 'omit',
      headers: {
        'Authorization': 'Bearer ' + this.key,
        'Content-Type': 'application/x-www-form-urlencoded'
      }
    };
    if (method === 'GET') { if (body) url += '?' + body; } else { init.body = body; }
    var resp, text;
    try {
      resp = await fetch(url, init);
      text = await resp.text();
    } catch (e) {
      return { error: { type: 'api_connection_error',
        message: 'Could not reach fauxpay at ' + this.base + ' (' + ((e && e.message) || e) + ').' } };
    }
    var json = null;
    try { json = JSON.parse(text); } catch (e) { /* not JSON */ }
    if (resp.ok && json && typeof json === 'object') return { body: json };
    if (json && json.error && typeof json.error === 'object') return { error: json.error };
    return { error: { type: 'api_error', message: 'fauxpay answered HTTP ' + resp.status + ' without a Stripe error.' } };
  };

  // ---------------------------------------------------------------------------------
  // 3-D Secure: fauxpay's page in a modal iframe, the intent polled until it moves on.

  function openModal(url) {
    var overlay = document.createElement('div');
    overlay.className = 'fauxpay-3ds-modal';
    overlay.setAttribute('role', 'dialog');
    overlay.setAttribute('aria-modal', 'true');
    overlay.setAttribute('aria-label', '3-D Secure authentication');
    overlay.style.cssText = 'position:fixed;top:0;left:0;right:0;bottom:0;z-index:2147483647;' +
      'background:rgba(0,0,0,.5);display:flex;align-items:center;justify-content:center';
    var frame = document.createElement('iframe');
    frame.className = 'fauxpay-3ds-frame';
    frame.title = '3-D Secure authentication';
    // fauxpay's challenge page in a frame answers its buttons without sending the frame
    // on to the merchant's return_url (this script leaves the frame when the intent moves).
    frame.src = url + (url.indexOf('?') >= 0 ? '&' : '?') + 'frame=1';
    frame.style.cssText = 'width:500px;height:600px;max-width:95vw;max-height:95vh;border:0;' +
      'border-radius:6px;background:#fff';
    overlay.appendChild(frame);
    document.body.appendChild(overlay);
    return function close() { if (overlay.parentNode) overlay.parentNode.removeChild(overlay); };
  }

  /** Handles the next action of `intent` (in requires_action); resolves {intent} as it now is, or {error}. */
  async function authenticate(api, kind, intent, secret) {
    var na = intent.next_action || {};
    var url = na.type === 'redirect_to_url' ? na.redirect_to_url && na.redirect_to_url.url
      : na.type === 'use_stripe_sdk' ? na.use_stripe_sdk && na.use_stripe_sdk.stripe_js : null;
    if (!url) return invalidRequest("fauxpay's Stripe.js stand-in cannot handle next_action of type " + na.type + '.');
    // fauxpay answers the path alone when it did not know its own origin.
    var close = openModal(new URL(url, api.base + '/').href);
    var path = KINDS[kind].path + encodeURIComponent(intent.id);
    var deadline = Date.now() + POLL_LIMIT_MS;
    try {
      for (;;) {
        await sleep(POLL_MS);
        var r = await api.call('GET', path, { client_secret: secret });
        if (r.body && r.body.status !== 'requires_action') return { intent: r.body };
        if (r.error && r.error.type !== 'api_connection_error') return { error: r.error };
        if (Date.now() > deadline) {
          return { error: { type: 'api_connection_error', message: 'Gave up waiting for 3-D Secure ' +
            'authentication after 10 minutes; retrieve the intent to learn its status.' } };
        }
      }
    } finally {
      close();
    }
  }

  /** After confirming or authenticating: a failed authentication (or decline) becomes {error}. */
  function settle(kind, intent) {
    var k = KINDS[kind], last = intent[k.lastError];
    if (intent.status === 'requires_payment_method' && last) {
      var error = Object.assign({}, last);
      error[k.errorKey] = intent;
      return { error: error };
    }
    var out = {};
    out[k.result] = intent;
    return out;
  }

  async function nextAction(api, kind, secret) {
    var id = intentId(secret, kind);
    if (!id) return badSecret(kind);
    var r = await api.call('GET', KINDS[kind].path + encodeURIComponent(id), { client_secret: secret });
    if (r.error) return { error: r.error };
    var intent = r.body;
    if (intent.status === 'requires_action') {
      var a = await authenticate(api, kind, intent, secret);
      if (a.error) return a;
      intent = a.intent;
    }
    return settle(kind, intent);
  }

  // ---------------------------------------------------------------------------------
  // The card Element ('payment' and 'card').

  var FIELDS = [
    { name: 'number', label: 'Card number', placeholder: '1234 1234 1234 1234', auto: 'cc-number', numeric: true, max: 19 },
    { name: 'expiry', label: 'Expiration', placeholder: 'MM / YY', auto: 'cc-exp', numeric: true, max: 7 },
    { name: 'cvc', label: 'CVC', placeholder: 'CVC', auto: 'cc-csc', numeric: true, max: 4 },
    { name: 'postal', label: 'Postal code', placeholder: '12345', auto: 'postal-code', numeric: false, max: 10 }
  ];

  var TEST_CARDS = [
    ['4242 4242 4242 4242', 'succeeds'],
    ['4000 0027 6000 3184', 'asks for 3-D Secure'],
    ['4000 0000 0000 0002', 'is declined'],
    ['4000 0000 0000 9995', 'insufficient funds']
  ];

  var INPUT_STYLE = 'display:block;width:100%;box-sizing:border-box;padding:8px;margin-top:2px;' +
    'border:1px solid #bbb;border-radius:4px;font:inherit';

  function createElement(group, type, options) {
    var opts = Object.assign({}, options);
    var listeners = {};
    var values = { number: '', expiry: '', cvc: '', postal: '' };
    var touched = {};
    var root = null, inputs = {}, alertP = null, container = null;
    var destroyed = false, focused = false;

    function fields() { return opts.hidePostalCode ? ['number', 'expiry', 'cvc'] : ['number', 'expiry', 'cvc', 'postal']; }

    function emit(event, payload) {
      (listeners[event] || []).slice().forEach(function (h) {
        try { h(payload); } catch (e) { setTimeout(function () { throw e; }); }
      });
    }

    /** First error of any field (`all`), or only those worth showing while typing. */
    function currentError(all) {
      var now = new Date();
      for (var i = 0, fs = fields(); i < fs.length; i++) {
        var f = fs[i], err = CHECKS[f](values[f], now);
        if (err && (all || err.definite || (touched[f] && values[f] !== ''))) return err;
      }
      return null;
    }

    function showError(err) { if (alertP) alertP.textContent = err ? err.message : ''; }

    function changeEvent() {
      var err = currentError(false);
      showError(err);
      emit('change', {
        elementType: type,
        empty: fields().every(function (f) { return values[f] === ''; }),
        complete: !currentError(true),
        error: stripDefinite(err),
        value: { postalCode: values.postal }
      });
    }

    function onInput(name, ev) {
      var input = inputs[name], raw = input.value, caret = input.selectionStart;
      var before = caret == null ? null : digitsOf(raw.slice(0, caret)).length;
      var v = raw;
      if (name === 'number') v = formatNumber(raw);
      else if (name === 'expiry') v = formatExpiry(raw, ev && /^delete/.test(ev.inputType || ''));
      else if (name === 'cvc') v = digitsOf(raw).slice(0, 4);
      if (v !== raw) {
        input.value = v;
        if (before != null && document.activeElement === input && name !== 'postal') {
          var at = caret === raw.length ? v.length : caretAfterDigits(v, before);
          try { input.setSelectionRange(at, at); } catch (e) { /* not focused */ }
        }
      }
      values[name] = v;
      changeEvent();
    }

    function render() {
      root = document.createElement('div');
      root.className = 'fauxpay-element';
      root.setAttribute('data-element-type', type);
      root.style.cssText = 'font:14px/1.4 system-ui,sans-serif;color:#222;max-width:440px';
      var row = document.createElement('div');
      row.style.cssText = 'display:flex;gap:8px;margin-top:8px';
      FIELDS.forEach(function (f) {
        if (fields().indexOf(f.name) < 0) return;
        var label = document.createElement('label');
        label.style.cssText = 'display:block;flex:1;color:#444';
        label.appendChild(document.createTextNode(f.label));
        var input = document.createElement('input');
        input.className = 'fauxpay-input';
        input.setAttribute('data-field', f.name);
        input.name = f.name;
        input.type = 'text';
        input.placeholder = f.placeholder;
        input.autocomplete = f.auto;
        input.maxLength = f.max;
        input.spellcheck = false;
        if (f.numeric) input.inputMode = 'numeric';
        input.style.cssText = INPUT_STYLE;
        input.value = values[f.name];
        input.disabled = !!opts.disabled;
        input.addEventListener('input', function (ev) { onInput(f.name, ev); });
        // WebDriver's clear() and some autofill fire only 'change'.
        input.addEventListener('change', function () { if (input.value !== values[f.name]) onInput(f.name); });
        input.addEventListener('focus', function () {
          if (!focused) { focused = true; emit('focus', { elementType: type }); }
        });
        input.addEventListener('blur', function (ev) {
          touched[f.name] = true;
          changeEvent();
          if (!root || !root.contains(ev.relatedTarget)) { focused = false; emit('blur', { elementType: type }); }
        });
        inputs[f.name] = input;
        label.appendChild(input);
        (f.name === 'number' ? root : row).appendChild(label);
      });
      root.appendChild(row);
      alertP = document.createElement('p');
      alertP.setAttribute('role', 'alert');
      alertP.className = 'fauxpay-error';
      alertP.style.cssText = 'color:#b42318;min-height:1.4em;margin:6px 0';
      root.appendChild(alertP);
      var list = document.createElement('ul');
      list.className = 'fauxpay-test-cards';
      list.style.cssText = 'font-size:12px;color:#666;margin:0;padding-left:18px';
      TEST_CARDS.forEach(function (c) {
        var li = document.createElement('li');
        var code = document.createElement('code');
        code.textContent = c[0];
        li.appendChild(code);
        li.appendChild(document.createTextNode(' ' + c[1]));
        list.appendChild(li);
      });
      root.appendChild(list);
      return root;
    }

    var element = {
      mount: function (target) {
        if (destroyed) throw new Error('This Element has been destroyed and cannot be mounted.');
        if (root) throw new Error('This Element is already mounted; unmount() it first.');
        var node = typeof target === 'string' ? document.querySelector(target) : target;
        if (!node || typeof node.appendChild !== 'function') {
          throw new Error('The selector you specified (' + target + ') applies to no DOM elements that are currently on the page.');
        }
        container = node;
        node.appendChild(render());
        setTimeout(function () { if (root) emit('ready', { elementType: type }); }, 0);
      },
      unmount: function () {
        if (root && root.parentNode) root.parentNode.removeChild(root);
        root = null; inputs = {}; alertP = null; container = null; focused = false;
      },
      destroy: function () {
        element.unmount();
        destroyed = true;
        delete group._elements[type];
      },
      on: function (event, handler) {
        (listeners[event] = listeners[event] || []).push(handler);
        return element;
      },
      off: function (event, handler) {
        if (!handler) delete listeners[event];
        else listeners[event] = (listeners[event] || []).filter(function (h) { return h !== handler && h._fauxpayOf !== handler; });
        return element;
      },
      once: function (event, handler) {
        var wrapped = function (payload) { element.off(event, wrapped); handler(payload); };
        wrapped._fauxpayOf = handler;
        return element.on(event, wrapped);
      },
      update: function (o) {
        o = o || {};
        Object.assign(opts, o);
        if (o.value && typeof o.value.postalCode === 'string') {
          values.postal = o.value.postalCode;
          if (inputs.postal) inputs.postal.value = values.postal;
        }
        Object.keys(inputs).forEach(function (k) { inputs[k].disabled = !!opts.disabled; });
      },
      focus: function () { if (inputs.number) inputs.number.focus(); },
      blur: function () {
        var a = document.activeElement;
        if (root && a && root.contains(a)) a.blur();
      },
      clear: function () {
        Object.keys(values).forEach(function (k) { values[k] = ''; if (inputs[k]) inputs[k].value = ''; });
        touched = {};
        changeEvent();
      },
      // Internal, for confirm*/submit: validates everything and shows the first error.
      _validate: function () {
        if (!root) return { type: 'validation_error', code: 'incomplete', message: 'The ' + type + ' Element is not mounted.' };
        fields().forEach(function (f) { touched[f] = true; });
        var err = currentError(true);
        showError(err);
        return stripDefinite(err) || null;
      },
      _card: function () {
        var e = parseExpiry(values.expiry);
        return { number: digitsOf(values.number), exp_month: e.month, exp_year: e.year,
          cvc: digitsOf(values.cvc), postal: opts.hidePostalCode ? undefined : values.postal.trim() };
      },
      _fauxpay: true
    };
    return element;
  }

  function isElement(x) { return !!(x && x._fauxpay === true && typeof x._card === 'function'); }

  // ---------------------------------------------------------------------------------
  // Elements groups.

  function createElements(options) {
    var group = {
      _options: Object.assign({}, options),
      _elements: {},
      create: function (type, opts) {
        if (type !== 'payment' && type !== 'card') {
          throw new Error("fauxpay's Stripe.js stand-in cannot create an Element of type '" + type +
            "': only 'payment' and 'card' (card payments; no wallets, Link or other methods).");
        }
        if (group._elements[type]) throw new Error('Can only create one Element of type ' + type + '.');
        return (group._elements[type] = createElement(group, type, opts));
      },
      getElement: function (type) { return group._elements[type] || null; },
      submit: async function () {
        var el = group._cardElement();
        if (!el) return invalidRequest('elements.submit(): no payment or card Element was created.');
        var err = el._validate();
        return err ? { error: err } : {};
      },
      update: function (opts) { Object.assign(group._options, opts); return Promise.resolve(); },
      fetchUpdates: async function () { return {}; },
      _cardElement: function () { return group._elements.payment || group._elements.card || null; }
    };
    return group;
  }

  // ---------------------------------------------------------------------------------
  // Stripe instances.

  /** Creates a card payment method from `element` (validated first). Resolves {id} or {error}. */
  async function createCardPaymentMethod(api, element, billingDetails, extra) {
    var err = element._validate();
    if (err) return { error: err };
    var card = element._card();
    var billing = Object.assign({}, billingDetails);
    if (card.postal !== undefined) billing.address = Object.assign({}, billing.address, { postal_code: card.postal });
    var params = Object.assign({}, extra, {
      type: 'card',
      card: { number: card.number, exp_month: card.exp_month, exp_year: card.exp_year, cvc: card.cvc },
      billing_details: billing
    });
    var r = await api.call('POST', '/v1/payment_methods', params);
    return r.error ? { error: r.error } : { id: r.body.id, paymentMethod: r.body };
  }

  /**
   * The shared confirm: pm is a `pm_…` id, {element, billing_details, extra} or undefined;
   * mode: {handleActions, redirect: 'always'|'if_required'|'never', returnUrl, params}.
   */
  async function confirm(api, kind, secret, pm, mode) {
    var k = KINDS[kind], id = intentId(secret, kind);
    if (!id) return badSecret(kind);
    if (mode.redirect === 'always' && !mode.returnUrl) {
      return invalidRequest("confirmParams.return_url is required when redirect is 'always'.", 'return_url');
    }
    var pmId = pm;
    if (pm && typeof pm === 'object') {
      var created = await createCardPaymentMethod(api, pm.element, pm.billing_details, pm.extra);
      if (created.error) return { error: created.error };
      pmId = created.id;
    }
    var params = Object.assign({}, mode.params, { payment_method: pmId, client_secret: secret });
    if (mode.returnUrl) params.return_url = mode.returnUrl;
    var r = await api.call('POST', k.path + encodeURIComponent(id) + '/confirm', params);
    if (r.error) return { error: r.error };
    var intent = r.body;
    if (intent.status === 'requires_action' && mode.handleActions !== false) {
      var a = await authenticate(api, kind, intent, secret);
      if (a.error) return a;
      intent = a.intent;
    }
    var out = settle(kind, intent);
    if (out.error || mode.redirect !== 'always') return out;
    if (k.done.indexOf(intent.status) < 0) {
      var e = { type: 'invalid_request_error', code: k.errorKey + '_unexpected_state',
        message: 'The ' + k.noun + ' ended in status ' + intent.status + '.' };
      e[k.errorKey] = intent;
      return { error: e };
    }
    var q = {};
    q[k.errorKey] = intent.id;
    q[k.errorKey + '_client_secret'] = secret;
    q.redirect_status = intent.status === 'processing' ? 'processing' : 'succeeded';
    window.location.assign(withQuery(mode.returnUrl, q));
    return never();
  }

  /** confirmPayment / confirmSetup: ({elements, clientSecret, confirmParams, redirect}). */
  async function confirmWithElements(api, kind, args) {
    args = args || {};
    var elements = args.elements;
    var secret = args.clientSecret || (elements && elements._options && elements._options.clientSecret);
    var cp = Object.assign({}, args.confirmParams);
    var returnUrl = cp.return_url;
    var pmData = cp.payment_method_data || {};
    var pm = cp.payment_method;
    delete cp.return_url; delete cp.payment_method_data; delete cp.payment_method;
    if (!pm) {
      var el = elements && elements._cardElement ? elements._cardElement() : null;
      if (!el) return invalidRequest('Pass the Elements group whose payment Element is mounted as `elements`.', 'elements');
      var extra = Object.assign({}, pmData);
      delete extra.billing_details; delete extra.type; delete extra.card;
      pm = { element: el, billing_details: pmData.billing_details, extra: extra };
    }
    var redirect = args.redirect === 'if_required' ? 'if_required' : 'always';
    return confirm(api, kind, secret, pm, { handleActions: true, redirect: redirect, returnUrl: returnUrl, params: cp });
  }

  /** confirmCardPayment / confirmCardSetup: (clientSecret, data, options). */
  async function confirmCard(api, kind, secret, data, options) {
    data = Object.assign({}, data);
    var pm = data.payment_method;
    var returnUrl = data.return_url;
    delete data.payment_method; delete data.return_url;
    if (pm && typeof pm === 'object') {
      if (!isElement(pm.card)) return invalidRequest('payment_method.card must be a card or payment Element.', 'payment_method');
      pm = { element: pm.card, billing_details: pm.billing_details, extra: {} };
    } else if (pm !== undefined && typeof pm !== 'string') {
      return invalidRequest('payment_method must be a pm_… id or {card: element}.', 'payment_method');
    }
    var handle = !(options && options.handleActions === false);
    return confirm(api, kind, secret, pm, { handleActions: handle, redirect: 'never', returnUrl: returnUrl, params: data });
  }

  function noWallets(name) {
    return function () {
      throw new Error('stripe.' + name + "(): fauxpay's Stripe.js stand-in does not do wallets " +
        '(Apple Pay, Google Pay, Link); use the card Element.');
    };
  }

  function Stripe(publishableKey, options) {
    if (typeof publishableKey !== 'string' || !publishableKey) {
      throw new Error('Please call Stripe() with your publishable key. You used an empty string.');
    }
    options = options || {};
    var base = String(options.apiBase || SCRIPT_BASE).replace(/\/+$/, '');
    var api = new Api(base, publishableKey);

    return {
      elements: function (opts) { return createElements(opts); },
      confirmPayment: function (args) { return confirmWithElements(api, 'payment', args); },
      confirmSetup: function (args) { return confirmWithElements(api, 'setup', args); },
      confirmCardPayment: function (secret, data, opts) { return confirmCard(api, 'payment', secret, data, opts); },
      confirmCardSetup: function (secret, data, opts) { return confirmCard(api, 'setup', secret, data, opts); },
      createPaymentMethod: async function (args) {
        args = args || {};
        var el = args.elements ? args.elements._cardElement() : args.card;
        var p = Object.assign({}, args.params || args);
        if (!isElement(el)) return invalidRequest('createPaymentMethod needs a card Element (card or elements).');
        var bd = p.billing_details;
        delete p.elements; delete p.card; delete p.type; delete p.billing_details;
        var r = await createCardPaymentMethod(api, el, bd, p);
        return r.error ? { error: r.error } : { paymentMethod: r.paymentMethod };
      },
      retrievePaymentIntent: async function (secret) {
        var id = intentId(secret, 'payment');
        if (!id) return badSecret('payment');
        var r = await api.call('GET', KINDS.payment.path + encodeURIComponent(id), { client_secret: secret });
        return r.error ? { error: r.error } : { paymentIntent: r.body };
      },
      retrieveSetupIntent: async function (secret) {
        var id = intentId(secret, 'setup');
        if (!id) return badSecret('setup');
        var r = await api.call('GET', KINDS.setup.path + encodeURIComponent(id), { client_secret: secret });
        return r.error ? { error: r.error } : { setupIntent: r.body };
      },
      handleNextAction: async function (args) {
        var secret = args && args.clientSecret, kind = secretKind(secret);
        return kind ? nextAction(api, kind, secret) : badSecret('payment');
      },
      handleCardAction: function (secret) { return nextAction(api, 'payment', secret); },
      handleCardSetup: function (secret, element, data) {
        // The old handleCardSetup(secret, element, data) confirmed; with a secret alone it authenticates.
        if (isElement(element)) {
          var pmd = (data && data.payment_method_data) || {};
          return confirmCard(api, 'setup', secret, { payment_method: { card: element, billing_details: pmd.billing_details } });
        }
        return nextAction(api, 'setup', secret);
      },
      redirectToCheckout: async function (args) {
        var sid = args && args.sessionId;
        if (typeof sid !== 'string' || !sid) {
          return invalidRequest("fauxpay's redirectToCheckout needs a sessionId (cs_test_…); line items are not supported.", 'sessionId');
        }
        window.location.assign(base + '/__fauxpay/checkout/' + encodeURIComponent(sid));
        return never();
      },
      paymentRequest: noWallets('paymentRequest'),
      registerAppInfo: function () {}
    };
  }

  Stripe.version = 3;
  // Marks this copy as fauxpay's (for the load-twice check) and exposes the pure helpers.
  Stripe.fauxpay = Object.freeze({
    apiBase: SCRIPT_BASE,
    helpers: Object.freeze({
      encodeForm: encodeForm, luhn: luhn, checkNumber: checkNumber, checkExpiry: checkExpiry,
      checkCvc: checkCvc, checkPostal: checkPostal, formatNumber: formatNumber,
      formatExpiry: formatExpiry, withQuery: withQuery, intentId: intentId
    })
  });
  window.Stripe = Stripe;
})();
