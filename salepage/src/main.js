// The sale page: one HTML for every campaign (the voucher id is read from
// the path), the campaign and its stock from cacheable GETs beside the page
// (the same for every buyer) and everything per buyer from the GraphQL API,
// with the buyer's token from the URL fragment (#token=…, which never
// reaches a server) or a postMessage from the embedding app
// ({type: "seckill:token", token}).
//
// The countdown runs on the server's clock: the page samples GET /time a
// few times and keeps the offset of the sample with the shortest round
// trip, so the buy button opens at the server's moment whatever the
// device's clock says. The challenge (quiz, or proof of work in a Web
// Worker) is done before the open, so the purchase is the only request at
// the open. Retryable answers wait retryAfter plus jitter.
//
// A campaign with a waiting room: the page counts down to the room's
// opensAt, joins then (the ticket kept in sessionStorage per voucher and
// buyer, so a reload keeps the place; joining again answers the same place
// anyway), follows waitingRoomStatus over the same WebSocket (position,
// estimated wait, how many joined), and opens the buy button only at the
// buyer's turn, sending the pass with the purchase (and the challenge's
// answer, which is fetched when the turn is near rather than at the open).
import { createClient } from 'graphql-ws';
import { t, lang } from './i18n.js';
import './sale.css';

const $ = (id) => document.getElementById(id);
const voucherId = decodeURIComponent(location.pathname.split('/').filter(Boolean).pop() || '');
const base = location.pathname.replace(/\/sale\/[^/]*$/, '');
const endpoint = base + '/graphql';

let token = '';
// The origin of the app that embeds the page and handed it the token, to
// which a payment opened here is handed (seckill:payment) so that it runs
// its provider's payment UI; '' when the token came in the URL.
let hostOrigin = '';
let offset = 0; // server clock minus device clock, ms
let campaign = null;
let challenge = null; // {kind, token, ...}
let answer = null; // {token, solution} ready to send
let bought = false;
let buying = false;
let autoBuy = false; // the buyer pressed Buy and a new challenge was needed
let ws = null;
// The waiting room (campaign.room, when the campaign has one).
let ticket = ''; // ours, from joinWaitingRoom
let roomStatus = null; // the last WaitingRoomStatus
let roomOver = false; // a final state: nothing more to wait for
let roomSub = null; // unsubscribes waitingRoomStatus
let pass = null; // YOUR_TURN's pass, valid until passExpires (server ms)
let passExpires = 0;
let turnAt = null; // server ms of the buyer's turn, once known
let joining = false;
let joinNotBefore = 0;
let watchNotBefore = 0;
let roomTimer = null;

const serverNow = () => Date.now() + offset;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// jitter spreads retries so buyers told to wait the same time do not come
// back in the same millisecond: s seconds plus up to half a second more.
const jitter = (s) => Math.max(0, s) * 1000 + Math.random() * 500;

function show(id, on) { $(id).hidden = !on; }
function say(text, kind) {
  const el = $('message');
  el.textContent = text;
  el.dataset.kind = kind || 'info';
}

// --- the token -------------------------------------------------------------
function tokenFromFragment() {
  const p = new URLSearchParams(location.hash.slice(1));
  const tok = p.get('token');
  if (tok) {
    // Out of the address bar, history and screenshots.
    history.replaceState(null, '', location.pathname + location.search);
  }
  return tok || '';
}

window.addEventListener('message', (ev) => {
  // Only the app that embeds this page (its parent frame) hands a token.
  if (ev.source !== window.parent || window.parent === window) return;
  const d = ev.data;
  if (d && d.type === 'seckill:token' && typeof d.token === 'string' && d.token) {
    token = d.token;
    hostOrigin = ev.origin; // the app that pays: payments are handed to it
    if (ws) { ws.dispose(); ws = null; }
    resetRoom();
    start();
  }
});

// --- the server's clock -----------------------------------------------------
async function syncClock() {
  let best = null;
  for (let i = 0; i < 5; i++) {
    try {
      const t0 = Date.now();
      const p0 = performance.now();
      const res = await fetch(base + '/time', { cache: 'no-store' });
      const body = await res.json();
      const rtt = performance.now() - p0;
      // The device clock at the midpoint of the round trip.
      const mid = t0 + rtt / 2;
      if (!best || rtt < best.rtt) best = { rtt, offset: body.now - mid };
    } catch (e) { /* a lost sample: the others decide */ }
  }
  if (best) offset = best.offset;
  const off = Math.round(offset / 1000);
  $('skew').textContent = Math.abs(off) >= 2 ? t('clockOff', off > 0 ? '-' + off : '+' + -off) : '';
  document.body.dataset.offset = String(Math.round(offset));
}

// --- GraphQL ----------------------------------------------------------------
class APIError extends Error {
  constructor(code, message, retryAfter) { super(message); this.code = code; this.retryAfter = retryAfter; }
}

async function gql(query, variables, auth) {
  let res;
  try {
    res = await fetch(endpoint, {
      method: 'POST',
      headers: Object.assign({ 'Content-Type': 'application/json' }, auth && token ? { Authorization: 'Bearer ' + token } : {}),
      body: JSON.stringify({ query, variables }),
    });
  } catch (e) {
    throw new APIError('NETWORK', String(e), 1);
  }
  let body = null;
  try { body = await res.json(); } catch (e) { /* below */ }
  const err = body && body.errors && body.errors[0];
  if (err) {
    const ext = err.extensions || {};
    const retry = ext.retryAfter ?? (res.headers.get('Retry-After') ? Number(res.headers.get('Retry-After')) : undefined);
    throw new APIError(ext.code || 'INTERNAL', err.message, retry);
  }
  if (!res.ok || !body) throw new APIError(res.status >= 500 ? 'UNAVAILABLE' : 'INTERNAL', res.statusText, 1);
  return body.data;
}

function errorText(e) {
  if (!(e instanceof APIError)) return t('INTERNAL');
  return t(e.code, e.retryAfter ?? 1);
}

// --- the campaign ------------------------------------------------------------
// money writes an amount in the payments' currency (the campaign answer
// names it and its minor unit's digits) as the buyer's language does.
function money(minor) {
  const cur = (campaign && campaign.currency) || 'CNY';
  const d = campaign && Number.isInteger(campaign.minorDigits) ? campaign.minorDigits : 2;
  const n = minor / 10 ** d;
  try {
    return new Intl.NumberFormat(lang === 'zh' ? 'zh-CN' : 'en', {
      style: 'currency', currency: cur, minimumFractionDigits: d, maximumFractionDigits: d,
    }).format(n);
  } catch (e) {
    return `${n.toFixed(d)} ${cur}`; // a code the browser does not know
  }
}
const when = (d) => d.toLocaleString(lang === 'zh' ? 'zh-CN' : 'en', { dateStyle: 'medium', timeStyle: 'short' });

// loadCampaign reads GET /sale/{id}/campaign, not GraphQL: it is the same
// for every buyer, so a CDN (2 s) and the server (1 s) answer a stampede
// of page loads before the sale with one read; only what is per buyer goes
// to the API.
async function loadCampaign() {
  let res;
  try {
    res = await fetch(`${base}/sale/${encodeURIComponent(voucherId)}/campaign`, { credentials: 'omit' });
  } catch (e) {
    throw new APIError('NETWORK', String(e), 1);
  }
  if (res.status === 404) throw new APIError('NOT_FOUND', 'no campaign', 0);
  let v = null;
  try { v = res.ok ? await res.json() : null; } catch (e) { /* below */ }
  if (!v) {
    const retry = Number(res.headers.get('Retry-After')) || 1;
    throw new APIError(res.ok || res.status >= 500 ? 'UNAVAILABLE' : 'INTERNAL', res.statusText, retry);
  }
  const before = campaign;
  campaign = { ...v, begin: Date.parse(v.beginTime), end: Date.parse(v.endTime) };
  const w = v.waitingRoom;
  if (w) {
    const opens = Date.parse(w.opensAt);
    // Joining early gives no edge (places are drawn at the open), so the
    // pages spread their joins over up to half a second after opensAt
    // (the same moment when the campaign is read again and the room
    // opens when it did).
    const joinAt = before && before.room && before.room.opens === opens ? before.room.joinAt
      : opens + Math.random() * Math.min(500, (campaign.begin - opens) / 4);
    campaign.room = { ...w, opens, joinAt };
  }
  $('title').textContent = v.title;
  document.title = v.title;
  $('subtitle').textContent = v.subTitle || '';
  $('price').textContent = money(v.payValue);
  $('worth').textContent = v.actualValue > v.payValue ? t('worth') + ' ' + money(v.actualValue) : '';
  $('left').textContent = `${v.remaining} ${t('of')} ${v.stock}`;
  $('window').textContent = `${when(new Date(campaign.begin))} – ${when(new Date(campaign.end))}`;
  show('campaign', true);
}

// reloadCampaign reads the campaign again after an edit; a failure waits
// for the next round (the campaign shown stays). The answer may come from
// a cache a little older than the stock's: its rev then still differs, and
// the next round reads it again.
let reloading = false;
async function reloadCampaign() {
  if (reloading) return;
  reloading = true;
  try { await loadCampaign(); } catch (e) { /* the next round */ } finally { reloading = false; }
}

// refreshStock updates what is left now and then, spread out by jitter.
async function refreshStock() {
  for (;;) {
    await sleep(jitter(5));
    await refreshStockOnce();
  }
}

// refreshStockOnce shows what is left and answers it (undefined when it
// could not be read). It reads GET /sale/{id}/stock, the same for every
// buyer and cached for 2 s by the browser and a CDN (and for 1 s by the
// server), not GraphQL: millions of open pages asking every few seconds
// must not each reach the origin.
async function refreshStockOnce() {
  try {
    const res = await fetch(`${base}/sale/${encodeURIComponent(voucherId)}/stock`, { credentials: 'omit' });
    if (!res.ok) return undefined;
    const s = await res.json();
    // The operator changed the sale since the page read it (moved its
    // window, ended it, changed its texts, challenge or room): read it
    // again, so that the countdown and the button follow.
    if (s.rev && campaign.rev && s.rev !== campaign.rev) await reloadCampaign();
    // Cached for up to 3 s: older than a sell-out the server just told us.
    if (s.remaining > 0 && performance.now() - soldOutAt < 3000) return undefined;
    $('left').textContent = `${s.remaining} ${t('of')} ${s.stock}`;
    document.body.dataset.remaining = String(s.remaining);
    return s.remaining;
  } catch (e) { return undefined; /* the next round */ }
}

// showSoldOut shows none left at once: the server just said so, and the
// stock endpoint's answer may be a few seconds old.
let soldOutAt = -Infinity; // performance.now() of the last sell-out heard
function showSoldOut() {
  soldOutAt = performance.now();
  $('left').textContent = `0 ${t('of')} ${campaign.stock}`;
  document.body.dataset.remaining = '0';
}

// --- countdown and button -------------------------------------------------
let resyncAt = Infinity; // set when the first tick runs
let resyncedBeforeOpen = false;
const resyncLead = 15000 + Math.random() * 10000;
function two(n) { return String(n).padStart(2, '0'); }
function clock(s) {
  const d = Math.floor(s / 86400);
  return `${d ? d + 'd ' : ''}${two(Math.floor(s / 3600) % 24)}:${two(Math.floor(s / 60) % 60)}:${two(s % 60)}`;
}

// canBuy says whether the buy button is open at now (server ms): the sale
// is on, the challenge answered when there is one, and with a waiting room
// the buyer's turn has come and its pass is still good.
function canBuy(now) {
  return now >= campaign.begin && now < campaign.end && !bought && !buying && !!token &&
    (campaign.challenge === 'NONE' || !!answer) && (!campaign.room || (!!pass && now < passExpires));
}

function tick() {
  const now = serverNow();
  const btn = $('buy');
  const cd = $('countdown');
  const room = campaign.room;
  if (room && now < room.opens && !bought) {
    // The pre-queue: the room opens (and the page joins) before the sale.
    const s = Math.ceil((room.opens - now) / 1000);
    cd.textContent = `${t('roomOpensIn')} ${clock(s)}`;
    cd.dataset.seconds = String(s);
    cd.dataset.to = 'room';
    btn.disabled = true;
  } else if (now < campaign.begin) {
    const s = Math.ceil((campaign.begin - now) / 1000);
    cd.textContent = `${t('opensIn')} ${clock(s)}`;
    cd.dataset.seconds = String(s);
    cd.dataset.to = 'sale';
    btn.disabled = true;
  } else if (now < campaign.end) {
    cd.textContent = t('open');
    cd.dataset.seconds = '0';
    btn.disabled = !canBuy(now);
  } else {
    cd.textContent = t('closed');
    btn.disabled = true;
  }
  btn.dataset.open = String(now >= campaign.begin && now < campaign.end);
  // Measure the clock again shortly before the open (the device's clock may
  // have been stepped since the page loaded), each page at its own moment
  // 15 to 25 s before, and every 10 minutes while the page waits.
  if (now < campaign.begin && (now >= resyncAt || (!resyncedBeforeOpen && campaign.begin - now < resyncLead))) {
    resyncedBeforeOpen = resyncedBeforeOpen || campaign.begin - now < resyncLead;
    resyncAt = now + 600000;
    syncClock();
  }
  // A challenge about to expire is replaced before it is refused.
  if (challenge && challenge.expiresAt && !buying && !bought && now > Date.parse(challenge.expiresAt) - 5000) {
    newChallenge(1);
  }
  // Fetch the challenge as soon as the server hands it out (shortly before
  // the open), so that it is solved when the sale opens; with a waiting
  // room, when the buyer's turn is near.
  if (campaign.challenge !== 'NONE' && token && !bought && !challenge && !fetchingChallenge && now < campaign.end && turnNear(now)) {
    getChallenge();
  }
  if (room) roomTick(now);
  // Wake up at the next whole second of the server's clock.
  setTimeout(tick, 1000 - (serverNow() % 1000) + 5);
}

// --- the challenge ----------------------------------------------------------
let fetchingChallenge = false;
let challengeNotBefore = 0;
let worker = null;

async function getChallenge() {
  if (serverNow() < challengeNotBefore) return;
  fetchingChallenge = true;
  try {
    const d = await gql(`query($id: ID!) { seckillChallenge(voucherId: $id) { kind token question choices bits expiresAt } }`, { id: voucherId }, true);
    challenge = d.seckillChallenge;
    answer = null;
    if (challenge.kind === 'QUIZ') showQuiz();
    else if (challenge.kind === 'PROOF_OF_WORK') solvePoW();
    else answer = { none: true };
  } catch (e) {
    // CONFLICT: not handed out yet; ask again a few seconds later.
    if (e.code !== 'CONFLICT') say(errorText(e), 'error');
    challengeNotBefore = serverNow() + jitter(e.retryAfter ?? 2);
    if (e.code === 'CONFLICT') $('challenge-note').textContent = t('challengeSoon');
  } finally {
    fetchingChallenge = false;
  }
}

function newChallenge(waitSeconds) {
  if (worker) { worker.terminate(); worker = null; }
  challenge = null;
  answer = null;
  challengeNotBefore = serverNow() + (waitSeconds ? jitter(waitSeconds) : 0);
  show('quiz', false);
}

function showQuiz() {
  const form = $('quiz');
  $('quiz-question').textContent = challenge.question;
  const box = $('quiz-choices');
  box.replaceChildren();
  if (challenge.choices && challenge.choices.length) {
    challenge.choices.forEach((c, i) => {
      const label = document.createElement('label');
      const input = document.createElement('input');
      input.type = 'radio';
      input.name = 'choice';
      input.value = c;
      input.id = 'choice-' + i;
      input.required = true;
      label.append(input, ' ', c);
      box.append(label);
    });
    show('quiz-text', false);
    $('quiz-text').required = false;
  } else {
    show('quiz-text', true);
    $('quiz-text').value = '';
    $('quiz-text').required = true;
  }
  $('challenge-note').textContent = '';
  show('quiz', true);
  form.onsubmit = (ev) => {
    ev.preventDefault();
    const picked = form.querySelector('input[name=choice]:checked');
    const solution = picked ? picked.value : $('quiz-text').value;
    if (!solution.trim()) return;
    answer = { token: challenge.token, solution };
    $('challenge-note').textContent = t('quizReady');
    show('quiz', false);
    tick0();
    answerReady();
  };
}

function solvePoW() {
  if (worker) worker.terminate();
  worker = new Worker(base + '/sale/assets/' + __POW_WORKER__);
  const prog = $('pow');
  show('pow', true);
  prog.removeAttribute('value');
  const expected = 2 ** (challenge.bits || 1);
  const tok = challenge.token;
  const started = performance.now();
  worker.onmessage = (ev) => {
    if (ev.data.progress) {
      prog.max = expected;
      prog.value = Math.min(ev.data.progress, expected * 0.99);
      $('challenge-note').textContent = t('powWorking', ev.data.progress);
    } else if (ev.data.solution !== undefined && challenge && challenge.token === tok) {
      answer = { token: tok, solution: ev.data.solution };
      // What the solve took, for tests and for a look in the console.
      document.body.dataset.powMs = String(Math.round(performance.now() - started));
      document.body.dataset.powTried = String(ev.data.tried);
      prog.max = 1;
      prog.value = 1;
      $('challenge-note').textContent = t('powDone');
      worker.terminate();
      worker = null;
      tick0();
      answerReady();
    }
  };
  worker.postMessage({ token: tok, bits: challenge.bits });
}

// answerReady goes on with a purchase the buyer already pressed Buy for,
// when it needed a new challenge (expired, used, not theirs).
function answerReady() {
  if (autoBuy && !bought) { autoBuy = false; buy(); }
}

// tick0 updates the button at once (tick runs once a second).
function tick0() {
  $('buy').disabled = !canBuy(serverNow());
}

// --- the purchase -----------------------------------------------------------
async function buy() {
  if (buying || bought) return;
  buying = true;
  tick0();
  say(t('buying'));
  let untold = false; // an attempt of this press went unanswered
  try {
    for (;;) {
      // Built again for each attempt: a retry sends the pass of now.
      const vars = { id: voucherId };
      const params = ['$id: ID!'];
      const args = ['voucherId: $id'];
      if (answer && answer.token) {
        vars.answer = { token: answer.token, solution: answer.solution };
        params.push('$answer: ChallengeAnswer');
        args.push('answer: $answer');
      }
      if (campaign.room && pass) {
        vars.pass = pass;
        params.push('$pass: String');
        args.push('pass: $pass');
      }
      const q = `mutation(${params.join(', ')}) { seckill(${args.join(', ')}) { outcome orderId message retryAfter } }`;
      let r;
      try {
        r = (await gql(q, vars, true)).seckill;
      } catch (e) {
        if (e.code === 'UNAVAILABLE' || e.code === 'NETWORK') {
          // The attempt may have bought a unit whose answer was lost.
          untold = true;
          const s = e.retryAfter ?? 1;
          say(errorText(e), 'wait');
          await sleep(jitter(s));
          continue;
        }
        say(errorText(e), 'error');
        return;
      }
      const o = r.outcome;
      document.body.dataset.outcome = o;
      const s = r.retryAfter ?? 1;
      switch (o) {
        case 'ACCEPTED':
          bought = true;
          stopRoom();
          say(t('ACCEPTED'), 'ok');
          follow(r.orderId);
          refreshStockOnce();
          return;
        case 'RATE_LIMITED': case 'TRY_AGAIN': case 'NOT_STARTED':
          say(t(o, s), 'wait');
          await sleep(jitter(s));
          continue;
        case 'CHALLENGE_WRONG':
          // The token is spent; a new question after the wait.
          say(t(o, s), 'error');
          newChallenge(s);
          return;
        case 'CHALLENGE_REQUIRED': case 'CHALLENGE_EXPIRED': case 'CHALLENGE_NOT_YOURS': case 'CHALLENGE_USED':
          // A new challenge, and the purchase goes on once it is answered.
          say(t(o), 'error');
          newChallenge(0);
          autoBuy = true;
          return;
        case 'PASS_REQUIRED':
          // No pass of ours (the room will give one at the turn): wait in line.
          pass = null;
          say(t(o), 'error');
          return;
        case 'PASS_EXPIRED':
          // The turn is over; the room says MISSED.
          pass = null;
          say(t(o), 'final');
          return;
        case 'SOLD_OUT': case 'ENDED':
          // After an attempt whose answer was lost, the unit may be ours:
          // a server that knows the sale is over answers that without
          // asking whether this buyer holds an order. Look before saying
          // so, a few times: the order lists once it is written (seconds
          // at worst, under load).
          if (untold && await heldAfterAll()) { say(t('ACCEPTED'), 'ok'); return; }
          bought = true; // nothing more to buy here
          stopRoom();
          say(t(o), 'final');
          if (o === 'SOLD_OUT') showSoldOut();
          return;
        case 'ALREADY_PURCHASED':
          bought = true;
          stopRoom();
          say(t(o), 'final');
          findOrder();
          return;
        default: // PAUSED and anything newer
          say(t(o) === o ? r.message : t(o), 'error');
          return;
      }
    }
  } finally {
    buying = false;
    tick0();
  }
}

// --- the order, live --------------------------------------------------------
function socket() {
  if (ws) return ws;
  const url = (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + endpoint;
  ws = createClient({
    url,
    connectionParams: () => ({ Authorization: 'Bearer ' + token }),
    // 4401/4403 (no or bad token) are final; anything else is retried
    // with the client's randomised backoff.
    shouldRetry: (e) => !(e && (e.code === 4401 || e.code === 4403)),
    retryAttempts: 10,
  });
  return ws;
}

function follow(orderId) {
  $('order-id').textContent = orderId;
  show('order', true);
  document.body.dataset.orderId = orderId;
  socket().subscribe(
    { query: `subscription($id: ID!) { orderStatus(orderId: $id) { orderId status at reason } }`, variables: { id: orderId } },
    {
      next: ({ data, errors }) => {
        if (errors && errors.length) {
          const code = (errors[0].extensions || {}).code || 'INTERNAL';
          say(t(code, 1), 'error');
          return;
        }
        const ev = data.orderStatus;
        document.body.dataset.status = ev.status;
        $('order-status').textContent = t(ev.status);
        $('order-status').dataset.status = ev.status;
        say(''); // the order's card says it
        const open = ev.status === 'CREATED';
        show('pay', open);
        show('cancel', open);
        if (open) loadOrder(orderId);
      },
      error: (e) => {
        const code = e && (e.code === 4401 || e.code === 4403) ? 'UNAUTHENTICATED' : 'NETWORK';
        say(t(code, 1), 'error');
      },
      complete: () => { show('pay', false); show('cancel', false); },
    });
  $('pay').onclick = () => pay(orderId);
  $('cancel').onclick = () => cancel(orderId);
}

async function loadOrder(orderId) {
  try {
    const d = await gql(`query($id: ID!) { order(id: $id) { amount payBy } }`, { id: orderId }, true);
    const o = d.order;
    if (o && o.payBy) $('order-payby').textContent = `${t('payBy')} ${when(new Date(o.payBy))} · ${money(o.amount)}`;
  } catch (e) { /* the status still shows */ }
}

async function pay(orderId) {
  $('pay').disabled = true;
  try {
    const d = await gql(`mutation($id: ID!) { createPayment(orderId: $id) { id amount currency status payBy clientSecret } }`, { id: orderId }, true);
    const p = d.createPayment;
    document.body.dataset.paymentId = p.id;
    $('payment-id').textContent = p.id;
    if (hostOrigin && hostOrigin !== 'null') {
      // The embedding app takes the buyer through its payment provider
      // (Stripe's clientSecret included); the order's status here turns
      // PAID when the provider confirms it to the server. Only to the
      // origin that handed the token (an opaque one gets nothing).
      try {
        window.parent.postMessage({
          type: 'seckill:payment', voucherId, orderId, paymentId: p.id, amount: p.amount, currency: p.currency,
          payBy: p.payBy, clientSecret: p.clientSecret ?? null,
        }, hostOrigin);
      } catch (e) { /* the status still follows the provider */ }
    }
    say(t('paying'), 'info');
  } catch (e) {
    say(errorText(e), 'error');
  } finally {
    $('pay').disabled = false;
  }
}

async function cancel(orderId) {
  $('cancel').disabled = true;
  try {
    await gql(`mutation($id: ID!) { cancelOrder(orderId: $id) { id status } }`, { id: orderId }, true);
  } catch (e) {
    say(errorText(e), 'error');
  } finally {
    $('cancel').disabled = false;
  }
}

// heldAfterAll looks for the buyer's order three times over a few seconds:
// a purchase whose answer was lost may have made one.
async function heldAfterAll() {
  for (let i = 0; i < 3; i++) {
    if (await findOrder()) return true;
    await sleep(jitter(1));
  }
  return false;
}

// findOrder follows the buyer's live order for this voucher, if any, so
// that a reload (or a second device) shows it instead of a buy button, and
// says whether there is one.
async function findOrder() {
  if (!token) return false;
  try {
    const d = await gql(`query { myOrders { id voucherId status } }`, {}, true);
    const o = d.myOrders.find((o) => o.voucherId === voucherId && ['QUEUED', 'CREATED', 'PAID'].includes(o.status));
    if (o && document.body.dataset.orderId !== o.id) {
      bought = true;
      stopRoom();
      tick0();
      follow(o.id);
    }
    return !!o;
  } catch (e) { return false; /* the buy button stays; the purchase would say ALREADY_PURCHASED */ }
}

// --- the waiting room -------------------------------------------------------
const roomFields = 'state position place joined estimatedWaitSeconds turnAt pass passExpiresAt';

// ticketKey names the buyer's ticket in sessionStorage: per voucher and
// buyer (the token's issuer and subject), since frames of one tab share it.
function ticketKey() {
  let who = token;
  try {
    const c = JSON.parse(atob(token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/')));
    if (c.sub) who = (c.iss || '') + '|' + c.sub;
  } catch (e) { /* not a JWT: the token itself */ }
  return 'seckill:room:' + voucherId + ':' + who;
}

function loadTicket() {
  try { return (token && sessionStorage.getItem(ticketKey())) || ''; } catch (e) { return ''; }
}

function saveTicket(tk) {
  try {
    if (tk) sessionStorage.setItem(ticketKey(), tk);
    else sessionStorage.removeItem(ticketKey());
  } catch (e) { /* no storage: a reload joins again, to the same place */ }
}

// resetRoom forgets the room of the last token (a new one came by postMessage).
function resetRoom() {
  if (roomSub) roomSub();
  roomSub = null;
  ticket = loadTicket();
  roomStatus = null;
  roomOver = false;
  pass = null;
  turnAt = null;
  joinNotBefore = watchNotBefore = 0;
  delete document.body.dataset.room;
}

// turnNear says whether to have the challenge ready: without a room at
// once (the server hands it out shortly before the open); with one, when
// the buyer's turn is at most 30 s away, so that a quiz is not answered
// again and again while they wait.
function turnNear(now) {
  if (!campaign.room) return true;
  if (roomOver || !roomStatus) return false;
  switch (roomStatus.state) {
    case 'YOUR_TURN': return true;
    case 'BEFORE_OPEN': return campaign.begin - now < 30000;
    case 'WAITING': return turnAt !== null && turnAt - now < 30000;
    default: return false;
  }
}

// roomTick drives the room once a second: join at opensAt, follow the
// status, count the wait down on the server's clock.
function roomTick(now) {
  const room = campaign.room;
  if (!token || bought || roomOver || now >= campaign.end) return;
  if (now < room.joinAt) {
    // Join at the moment, not at the next whole second.
    if (!roomTimer && room.joinAt - now < 1100) {
      roomTimer = setTimeout(() => { roomTimer = null; roomTick(serverNow()); }, room.joinAt - now);
    }
    return;
  }
  if (!ticket) {
    if (!joining && now >= joinNotBefore) join();
    return;
  }
  if (!roomSub && now >= watchNotBefore) watchRoom();
  roomClock(now);
}

async function join() {
  joining = true;
  show('room', true);
  $('room-state').textContent = t('roomJoining');
  try {
    const d = await gql(`mutation($id: ID!) { joinWaitingRoom(voucherId: $id) { ticket joinedBeforeOpen status { ${roomFields} } } }`,
      { id: voucherId }, true);
    const j = d.joinWaitingRoom;
    ticket = j.ticket;
    saveTicket(ticket);
    document.body.dataset.joinedBeforeOpen = String(j.joinedBeforeOpen);
    showRoom(j.status);
    watchRoom();
  } catch (e) {
    const now = serverNow();
    if (e.code === 'CONFLICT') {
      // Before the open (clocks a little apart), after the sale, or sold out.
      if (now >= campaign.end) { roomEnd('ENDED'); return; }
      if (now >= campaign.room.opens + 1000 && await refreshStockOnce() === 0) { roomEnd('SOLD_OUT'); return; }
      joinNotBefore = serverNow() + jitter(1);
    } else if (e.code === 'UNAUTHENTICATED' || e.code === 'FORBIDDEN' || e.code === 'NOT_FOUND') {
      say(errorText(e), 'error');
      joinNotBefore = Infinity; // until another token comes
    } else {
      say(errorText(e), 'wait');
      joinNotBefore = now + jitter(e.retryAfter ?? 2);
    }
  } finally {
    joining = false;
  }
}

function watchRoom() {
  if (roomSub || !ticket || roomOver || bought) return;
  const mine = ticket;
  let unsub = null;
  const done = () => { if (roomSub === unsub) roomSub = null; };
  unsub = socket().subscribe(
    { query: `subscription($id: ID!, $ticket: String!) { waitingRoomStatus(voucherId: $id, ticket: $ticket) { ${roomFields} } }`,
      variables: { id: voucherId, ticket: mine } },
    {
      next: ({ data, errors }) => {
        if (ticket !== mine) return;
        if (errors && errors.length) {
          const ext = errors[0].extensions || {};
          if (ext.code === 'INVALID_INPUT' && ext.field === 'ticket') {
            // Not ours (another buyer's tab, a new key): join again.
            ticket = '';
            saveTicket('');
          } else {
            say(t(ext.code || 'INTERNAL', 2), 'wait');
            watchNotBefore = serverNow() + jitter(ext.retryAfter ?? 2);
          }
          return;
        }
        if (!data || !data.waitingRoomStatus) return;
        // Updates tell what changed, not the last error.
        if ($('message').dataset.kind === 'wait') say('');
        showRoom(data.waitingRoomStatus);
      },
      error: (e) => {
        done();
        if (e && (e.code === 4401 || e.code === 4403)) {
          say(t('UNAUTHENTICATED'), 'error');
          watchNotBefore = Infinity;
        } else {
          say(t('NETWORK', 2), 'wait');
          watchNotBefore = serverNow() + jitter(2);
        }
      },
      complete: () => {
        // At a final state; otherwise (an error answered, the server went
        // away) watch again in a moment.
        done();
        if (!roomOver) watchNotBefore = Math.max(watchNotBefore, serverNow() + jitter(1));
      },
    });
  roomSub = unsub;
}

function showRoom(st) {
  if (bought || roomOver) return;
  const before = roomStatus && roomStatus.state;
  roomStatus = st;
  const b = document.body.dataset;
  b.room = st.state;
  b.position = st.position == null ? '' : String(st.position);
  b.joined = String(st.joined);
  turnAt = st.turnAt ? Date.parse(st.turnAt) : null;
  if (st.state === 'YOUR_TURN' && st.pass) {
    pass = st.pass;
    passExpires = Date.parse(st.passExpiresAt);
    b.turnAt = String(turnAt);
  } else {
    pass = null;
  }
  show('room', true);
  setText('room-state', t(st.state));
  setText('room-position', st.state === 'WAITING' && st.position != null ? t('ahead', st.position) : '');
  setText('room-joined', t('roomJoined', st.joined));
  if (st.state === 'MISSED' || st.state === 'SOLD_OUT' || st.state === 'ENDED') {
    roomEnd(st.state);
    return;
  }
  roomClock(serverNow());
  tick0();
  if (st.state === 'YOUR_TURN' && before !== 'YOUR_TURN') {
    // A keyboard buyer is taken to the button, unless busy with the quiz.
    const a = document.activeElement;
    if ((!a || a === document.body) && !$('buy').disabled) $('buy').focus();
    answerReady();
  }
}

// setText changes an element's text only when it differs, so that a live
// region announces changes, not every update.
function setText(id, s) {
  if ($(id).textContent !== s) $(id).textContent = s;
}

// roomClock counts the wait (or the pass's time) down on the server's clock
// between the server's updates.
function roomClock(now) {
  const st = roomStatus;
  let s = '';
  if (st && st.state === 'WAITING') {
    const secs = turnAt !== null ? Math.ceil((turnAt - now) / 1000) : st.estimatedWaitSeconds;
    if (secs != null) s = t('roomWait', Math.max(0, secs));
  } else if (st && st.state === 'YOUR_TURN' && pass) {
    s = t('passLeft', Math.max(0, Math.ceil((passExpires - now) / 1000)));
  }
  setText('room-wait', s);
}

// roomEnd shows a final state of the room, in the message (the room's card
// goes): there is nothing to wait for.
function roomEnd(state) {
  roomOver = true;
  document.body.dataset.room = state;
  say(t(state), 'final');
  stopRoom();
  tick0();
  if (state === 'SOLD_OUT') showSoldOut();
}

// stopRoom stops following the room and hides it: bought, or over.
function stopRoom() {
  if (roomSub) { const u = roomSub; roomSub = null; u(); }
  pass = null;
  show('room', false);
}

// --- start ------------------------------------------------------------------
let started = false;
async function start() {
  if (!token) {
    say(t('noToken'), 'error');
  } else if (started) {
    say('');
    findOrder();
  }
  if (started) return;
  started = true;
  document.documentElement.lang = lang === 'zh' ? 'zh-CN' : 'en';
  $('buy').textContent = t('buy');
  $('pay').textContent = t('pay');
  $('cancel').textContent = t('cancel');
  for (const el of document.querySelectorAll('[data-i18n]')) el.textContent = t(el.dataset.i18n);
  $('buy').onclick = buy;
  ticket = loadTicket();
  for (;;) {
    try {
      await Promise.all([syncClock(), loadCampaign()]);
      break;
    } catch (e) {
      if (e.code === 'NOT_FOUND') { say(t('notFound'), 'error'); return; }
      say(errorText(e), 'wait');
      await sleep(jitter(e.retryAfter ?? 2));
    }
  }
  if (token) say('');
  await findOrder();
  document.body.dataset.ready = 'true';
  resyncAt = serverNow() + 600000;
  // Loaded shortly before the open: the clock was just measured.
  resyncedBeforeOpen = campaign.begin - serverNow() < resyncLead;
  tick();
  refreshStock();
}

token = tokenFromFragment();
start();
