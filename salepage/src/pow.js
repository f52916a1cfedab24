// The proof-of-work solver, in a Web Worker so the page stays responsive:
// find a decimal counter whose SHA-256(token + ":" + counter) starts with
// `bits` zero bits (docs/challenge.md; internal/bench/challenge.go does the
// same in Go). It posts {progress: hashes tried} now and then, and
// {solution} at the end.
const enc = new TextEncoder();

function zeroBits(h) {
  let z = 0;
  for (const b of h) {
    if (b === 0) { z += 8; continue; }
    return z + Math.clz32(b) - 24;
  }
  return z;
}

onmessage = async (ev) => {
  const { token, bits } = ev.data;
  const batch = 512;
  for (let i = 0; ; i += batch) {
    const sums = await Promise.all(Array.from({ length: batch }, (_, k) =>
      crypto.subtle.digest('SHA-256', enc.encode(token + ':' + (i + k)))));
    for (let k = 0; k < batch; k++) {
      if (zeroBits(new Uint8Array(sums[k])) >= bits) {
        postMessage({ solution: String(i + k), tried: i + k + 1 });
        return;
      }
    }
    postMessage({ progress: i + batch });
  }
};
