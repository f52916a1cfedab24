// The proof-of-work solver, in a Web Worker so the page stays responsive:
// find a decimal counter whose SHA-256(token + ":" + counter) starts with
// `bits` zero bits (docs/challenge.md; internal/bench/challenge.go does the
// same in Go). It posts {progress: hashes tried} now and then, and
// {solution, tried} at the end.
//
// SHA-256 is @noble/hashes' (from the npm lock), not WebCrypto's: a
// digest() per counter is a promise each, which in headless Chromium makes
// the default 20 bits take tens of seconds on average
// (TestSalePageProofOfWork logs the rate). Hashing synchronously,
// from the state after the token's prefix (hashed once), is several times
// faster. The server checks every solution with Go's crypto/sha256, so a
// drift would fail the browser tests' purchases.
import { sha256 } from '@noble/hashes/sha256';

const enc = new TextEncoder();

function zeroBits(h) {
  let z = 0;
  for (const b of h) {
    if (b === 0) { z += 8; continue; }
    return z + Math.clz32(b) - 24;
  }
  return z;
}

onmessage = (ev) => {
  const { token, bits } = ev.data;
  const prefix = sha256.create().update(enc.encode(token + ':'));
  const every = 1 << 14;
  for (let i = 0; ; i++) {
    const h = prefix.clone().update(enc.encode(String(i))).digest();
    if (zeroBits(h) >= bits) {
      postMessage({ solution: String(i), tried: i + 1 });
      return;
    }
    if ((i + 1) % every === 0) postMessage({ progress: i + 1 });
  }
};
