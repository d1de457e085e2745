// Regenerates float-ties.json: doubles whose shortest round-trip digits are an
// exact tie between two candidates, with the text Node's `String(x)` gives them
// (ECMA-262 picks the even digit). Run by hand: node tests/data/float-ties.mjs
import { writeFileSync } from "node:fs";

// A fixed-seed xorshift, so the file only changes when this script does.
let state = 0x2545f4914f6cdd1dn;
const mask = (1n << 64n) - 1n;
function next() {
  state ^= (state << 13n) & mask;
  state ^= state >> 7n;
  state ^= (state << 17n) & mask;
  return state;
}

// The exact decimal value of `x`, whose ulp is 2^-q (x * 2^q is an integer).
function exactDecimal(x, q) {
  const scaled = BigInt(Math.abs(x) * 2 ** q) * 5n ** BigInt(q);
  const digits = scaled.toString().padStart(q + 1, "0");
  const int = digits.slice(0, digits.length - q);
  const frac = digits.slice(digits.length - q).replace(/0+$/, "");
  return (x < 0 ? "-" : "") + int + (frac ? "." + frac : "");
}

const ties = [];
const seen = new Set();
while (ties.length < 120) {
  // Magnitudes 2^44 .. 2^51: ulps 1/256 .. 1/2, so the exact decimal ends in 5.
  const q = 1 + Number(next() % 8n);
  const high = 52 - q;
  const mantissa = (1n << 52n) | (next() & ((1n << 52n) - 1n));
  let x = Number(mantissa) * 2 ** (high - 52);
  if (next() & 1n) x = -x;
  const exact = exactDecimal(x, q);
  const significant = exact.replace(/^-/, "").replace(".", "").replace(/^0+/, "");
  const shortest = String(x).replace(/^-/, "").replace(".", "").replace(/^0+/, "");
  if (significant.length !== shortest.length + 1 || !significant.endsWith("5")) continue;
  // Both neighbours at that length must read back as x: then it is a tie.
  const intLen = exact.replace(/^-/, "").indexOf(".");
  const low = significant.slice(0, -1);
  const up = (BigInt(low) + 1n).toString();
  if (up.length !== low.length) continue;
  const asNumber = (d) => Number((x < 0 ? "-" : "") + d.slice(0, intLen) + "." + d.slice(intLen));
  if (asNumber(low) !== x || asNumber(up) !== x || seen.has(exact)) continue;
  seen.add(exact);
  ties.push({ value: exact, js: String(x) });
}
writeFileSync(new URL("./float-ties.json", import.meta.url), JSON.stringify(ties, null, 1) + "\n");
console.log(`wrote ${ties.length} exact ties`);
