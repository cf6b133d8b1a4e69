// The backward page's script: plain JavaScript, no library, so the page stays one file that
// opens from disk. It reads the JSON written by minitensor/backward_page/__init__.py and draws
// the graph (SVG), the timeline and the current node's panel (numbers and canvas heatmaps).
"use strict";

// JSON has no Infinity or NaN: __init__.py's _finite_json writes them as these strings.
const NONFINITE = { "__inf__": Infinity, "__-inf__": -Infinity, "__nan__": NaN };
const D = JSON.parse(document.getElementById("data").textContent, (key, value) => (
  typeof value === "string" && value in NONFINITE ? NONFINITE[value] : value));
unpool(D);
const N = D.steps.length;
const SMALL = 48;            // arrays up to this many elements are shown as numbers
const TOLERANCE = 0.01;      // predict mode: a guess within 1% (or 1e-4) of the value counts
const SVG = "http://www.w3.org/2000/svg";

let position = 0;            // 0: before the first node; k: the k-th node's backward has run
const guesses = D.steps.map(() => null);   // predict mode: null, "right", "wrong" or "revealed"
const said = D.steps.map(() => null);      // predict mode: what the student typed, as typed
const firstMiss = D.steps.map(() => null); // predict mode: a first wrong answer (a second try is allowed)
const asked = D.steps.map((s) => (s.predict.length ? s.index % s.predict.length : null));  // which target
const stepOfNode = {};
D.steps.forEach((s, i) => { stepOfNode[s.node] = i; });

// Long value lists are written once each, as base64 of float32 (see _pooled in __init__.py): put
// them back as plain arrays of numbers, with null for NaN and Inf, as the rest of the page reads them.
function unpool(data) {
  const decoded = {};
  function values(i) {
    if (!(i in decoded)) {
      const bytes = Uint8Array.from(atob(data.pool[i]), (c) => c.charCodeAt(0));
      decoded[i] = Array.from(new Float32Array(bytes.buffer), (v) => (Number.isFinite(v) ? v : null));
    }
    return decoded[i];
  }
  (function visit(item) {
    if (Array.isArray(item)) { item.forEach(visit); return; }
    if (item === null || typeof item !== "object") return;
    for (const [key, value] of Object.entries(item)) {
      if (key === "pool" && item === data) continue;
      if (value !== null && typeof value === "object" && typeof value.pool === "number") item[key] = values(value.pool);
      else visit(value);
    }
  })(data);
}

// ---------------------------------------------------------------- numbers

function fmt(x, digits) {
  if (x === null || x === undefined) return "NaN/Inf";
  if (Number.isNaN(x)) return "NaN";
  if (!Number.isFinite(x)) return x > 0 ? "inf" : "-inf";
  if (x === 0) return "0";
  const a = Math.abs(x);
  if (a >= 1e5 || a < 1e-3) return x.toExponential((digits || 5) - 1);
  return String(Number(x.toPrecision(digits || 5)));
}

// signed and short, for the graph's boxes: a few values, or the norm of a larger array
function brief(rec, what) {
  if (!rec) return "";
  const size = rec.shape.reduce((a, b) => a * b, 1);
  if (rec.data && size <= 4) {
    const values = rec.data.map((v) => fmt(v, 4));
    return `${what} ${size === 1 && rec.shape.length === 0 ? values[0] : "[" + values.join(", ") + "]"}`;
  }
  if (what === "grad") return `|grad| ${fmt(rec.norm, 4)}`;
  return rec.mean !== undefined ? `${what} mean ${fmt(rec.mean, 3)}` : `${what} |${fmt(rec.norm, 3)}|`;
}

// What a student types as a number: 0.25, -4/2, 1e-3, 3*(2-0.5), 2**-3. Returns {value} or {error}
// that says why it cannot be read (a comma, a letter, an unclosed bracket, a division by zero).
function parseNumber(text) {
  const source = text.trim();
  if (source === "") return { error: "type a number first" };
  if (/^-?\d+,\d+$/.test(source)) return { error: `"${source}" has a comma: write a decimal point (${source.replace(",", ".")})` };
  let at = 0;
  const fail = (why) => { throw new Error(why); };
  const peek = () => { while (source[at] === " ") at++; return source[at]; };
  function number() {
    const match = /^(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?/.exec(source.slice(at));
    if (!match) {
      const c = source[at];
      fail(c === undefined ? "it ends too early: a number is missing at the end"
        : `"${c}" at position ${at + 1} is not part of a number (use digits, . e + - * / ** and brackets)`);
    }
    at += match[0].length;
    return Number(match[0]);
  }
  function factor() {
    const c = peek();
    if (c === "-") { at++; return -factor(); }
    if (c === "+") { at++; return factor(); }
    let value;
    if (c === "(") {
      at++;
      value = sum();
      if (peek() !== ")") fail("a bracket is opened and never closed");
      at++;
    } else value = number();
    if (peek() === "^" || source.startsWith("**", at)) {
      at += source[at] === "^" ? 1 : 2;
      value = Math.pow(value, factor());
    }
    return value;
  }
  function product() {
    let value = factor();
    for (;;) {
      const c = peek();
      if (c === "*" && source[at + 1] !== "*") { at++; value *= factor(); }
      else if (c === "/") {
        at++;
        const d = factor();
        if (d === 0) fail("it divides by zero");
        value /= d;
      } else return value;
    }
  }
  function sum() {
    let value = product();
    for (;;) {
      const c = peek();
      if (c === "+") { at++; value += product(); }
      else if (c === "-") { at++; value -= product(); }
      else return value;
    }
  }
  try {
    const value = sum();
    if (peek() !== undefined) fail(`"${source.slice(at)}" after the number is not understood`);
    if (!Number.isFinite(value)) fail("it is not a finite number");
    return { value };
  } catch (error) {
    return { error: error.message };
  }
}

function shapeText(shape) {
  return "(" + shape.join(", ") + (shape.length === 1 ? ",)" : ")");
}

function el(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes || {})) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attributes) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attributes || {})) node.setAttribute(key, value);
  return node;
}

// ---------------------------------------------------------------- arrays

function stats(rec) {
  const line = el("div", { class: "stats" });
  line.append("shape ", el("b", {}, shapeText(rec.shape)), "  norm ",
              el("b", { class: "norm", "data-norm": String(rec.norm) }, fmt(rec.norm, 6)),
              "  min ", el("b", {}, fmt(rec.min)), "  max ", el("b", {}, fmt(rec.max)));
  if (rec.mean !== undefined) line.append("  mean ", el("b", {}, fmt(rec.mean)));
  if (rec.nonfinite) line.append(el("b", { class: "fail" }, `  ${rec.nonfinite} NaN/Inf`));
  return line;
}

// numpy-like text of a small array: nested brackets per axis, 8 numbers a line, aligned
function nested(data, shape) {
  const width = Math.max(...data.map((v) => fmt(v).length));
  function text(offset, axis) {
    if (shape.length === 0) return fmt(data[0]);
    const indent = " ".repeat(axis + 1);
    if (axis === shape.length - 1) {
      const lines = [];
      for (let i = 0; i < shape[axis]; i += 8) {
        const row = [];
        for (let j = i; j < Math.min(i + 8, shape[axis]); j++) row.push(fmt(data[offset + j]).padStart(width));
        lines.push(row.join(" "));
      }
      return "[" + lines.join("\n" + indent) + "]";
    }
    let stride = 1;
    for (let a = axis + 1; a < shape.length; a++) stride *= shape[a];
    const parts = [];
    for (let i = 0; i < shape[axis]; i++) parts.push(text(offset + i * stride, axis + 1));
    return "[" + parts.join("\n" + indent) + "]";
  }
  return text(0, 0);
}

// colour of a value: diverging blue-white-red around 0, or white-blue for weights in [0, 1]
function colour(value, scale, sequential) {
  if (value === null) return "rgb(0,0,0)";
  let t = scale > 0 ? value / scale : 0;
  t = Math.max(-1, Math.min(1, t));
  if (sequential) {
    return `rgb(${Math.round(255 - 215 * t)},${Math.round(255 - 165 * t)},${Math.round(255 - 75 * t)})`;
  }
  if (t >= 0) return `rgb(255,${Math.round(255 * (1 - t))},${Math.round(255 * (1 - t))})`;
  return `rgb(${Math.round(255 * (1 + t))},${Math.round(255 * (1 + t))},255)`;
}

// a heatmap of the last two axes, with a selector for each axis before them
function heatmap(rec, options) {
  const shape = rec.shape.length >= 2 ? rec.shape : rec.shape.length === 1 ? [1, rec.shape[0]] : [1, 1];
  const rows = shape[shape.length - 2], cols = shape[shape.length - 1];
  const lead = shape.slice(0, -2);
  const chosen = lead.map(() => 0);
  const cell = Math.max(3, Math.min(options.cell || 22, Math.floor((options.width || 380) / cols), Math.floor(320 / rows)));
  const canvas = el("canvas", { width: cols * cell, height: rows * cell });
  const hover = el("div", { class: "hover" }, options.sequential ? "white 0 to blue 1; hover a cell to read it"
    : "blue < 0 < red, scaled to the largest |value|; hover a cell to read it");
  const scale = options.sequential ? 1 : Math.max(Math.abs(rec.min || 0), Math.abs(rec.max || 0));
  const hidden = options.hidden;
  let base = 0;

  function draw() {
    base = 0;
    let stride = rows * cols;
    for (let a = lead.length - 1; a >= 0; a--) { base += chosen[a] * stride; stride *= lead[a]; }
    const g = canvas.getContext("2d");
    for (let i = 0; i < rows; i++) {
      for (let j = 0; j < cols; j++) {
        const k = base + i * cols + j;
        if (hidden && hidden[k] === "1") {
          g.fillStyle = "#d5d8de";
          g.fillRect(j * cell, i * cell, cell, cell);
          g.strokeStyle = "#8a909c";
          g.beginPath();
          g.moveTo(j * cell + 2, i * cell + 2); g.lineTo((j + 1) * cell - 2, (i + 1) * cell - 2);
          g.moveTo((j + 1) * cell - 2, i * cell + 2); g.lineTo(j * cell + 2, (i + 1) * cell - 2);
          g.stroke();
        } else {
          g.fillStyle = colour(rec.data[k], scale, options.sequential);
          g.fillRect(j * cell, i * cell, cell, cell);
        }
      }
    }
  }
  canvas.addEventListener("mousemove", (event) => {
    const box = canvas.getBoundingClientRect();
    const j = Math.floor((event.clientX - box.left) / cell), i = Math.floor((event.clientY - box.top) / cell);
    if (i < 0 || j < 0 || i >= rows || j >= cols) return;
    const k = base + i * cols + j;
    const index = chosen.concat(rec.shape.length >= 2 ? [i, j] : rec.shape.length === 1 ? [j] : []);
    const masked = hidden && hidden[k] === "1" ? " (masked)" : "";
    hover.textContent = `[${index.join(", ")}] = ${fmt(rec.data[k], 6)}${masked}`;
  });
  const selectors = el("div", { class: "selectors" });
  if (lead.length) {
    selectors.append("slice ");
    lead.forEach((size, a) => {
      if (size === 1) { selectors.append(`[0]`); return; }
      const input = el("input", { type: "number", min: 0, max: size - 1, value: 0, "aria-label": `index on axis ${a}` });
      input.addEventListener("input", () => {
        chosen[a] = Math.max(0, Math.min(size - 1, Number(input.value) || 0));
        draw();
      });
      selectors.append("[", input, `/${size}]`);
    });
    selectors.append(", :, :");
  }
  draw();
  return el("div", {}, lead.length ? selectors : null, canvas, hover);
}

function histogram(rec) {
  const width = 300, height = 70, counts = rec.hist.counts;
  const most = Math.max(1, ...counts);
  const picture = svg("svg", { width, height: height + 14 });
  counts.forEach((c, i) => {
    const h = (height * c) / most;
    picture.append(svg("rect", { x: (i * width) / counts.length, y: height - h, width: width / counts.length - 1,
                                 height: h, fill: "#6b8fc7" }));
  });
  const lo = svg("text", { x: 0, y: height + 12, "font-size": 10 }); lo.textContent = fmt(rec.hist.lo);
  const hi = svg("text", { x: width, y: height + 12, "font-size": 10, "text-anchor": "end" }); hi.textContent = fmt(rec.hist.hi);
  picture.append(lo, hi);
  return el("div", {}, el("div", { class: "muted" }, `summarised: ${rec.shape.reduce((a, b) => a * b, 1)} elements `
    + `(more than max_elements=${D.max_elements}); histogram of the values`), picture);
}

function arrayView(title, rec, options) {
  const box = el("div", { class: "array" }, el("div", { class: "title" }, title), stats(rec));
  const size = rec.shape.reduce((a, b) => a * b, 1);
  if (rec.hist) box.append(histogram(rec));
  else if (!rec.data) box.append(el("div", { class: "muted" }, `${size} elements: the page keeps their statistics only`));
  else if (size <= SMALL && !(options && options.hidden)) box.append(el("pre", {}, nested(rec.data, rec.shape)));
  else box.append(heatmap(rec, options || {}));
  return box;
}

// ---------------------------------------------------------------- attention maps

// The 5-D shape MultiHeadAttention gives q, k, v: batch, key/value head, query heads per
// key/value head (grouped-query attention), then T and d_head.
function leadNames(node, count) {
  if (node.module_class === "MultiHeadAttention" && count === 3) return ["batch", "kv head", "query head of group"];
  if (count === 2) return ["batch", "head"];
  if (count === 1) return ["batch"];
  return Array.from({ length: count }, (_, a) => `axis ${a}`);
}

function shapeExplained(step, node) {
  const a = step.attention;
  const names = leadNames(node, a.lead.length);
  const parts = a.lead.map((n, i) => `${names[i]} ${n}`);
  let text = `q ${shapeText(a.q_shape)} and out ${shapeText(a.out_shape)}: ${parts.join(", ")}`
    + `${parts.length ? ", " : ""}then ${a.tq} queries (or keys) and d_head ${a.q_shape[a.q_shape.length - 1]}.`;
  if (names[1] === "kv head") {
    text += " MultiHeadAttention gives the queries a group axis, (batch, kv heads, heads per kv head, T, d_head),"
      + " so that in grouped-query attention several query heads share one key/value head by broadcasting;"
      + ` here ${a.lead[2]} query head${a.lead[2] === 1 ? "" : "s"} per key/value head.`;
  }
  return el("div", { class: "muted shape-explained" }, text);
}

function tokenOf(i) {
  return D.tokens && i < D.tokens.length ? ` '${D.tokens[i]}'` : "";
}

// The weights and dL/dscores of one (batch, head) slice at a time; the selectors are shared, so
// both maps always show the same slice. Rows are queries, columns keys.
function attentionMaps(step, node, gradHidden) {
  const a = step.attention;
  const names = leadNames(node, a.lead.length);
  const chosen = a.lead.map(() => 0);
  const box = el("div", { class: "attention" });
  const selectors = el("div", { class: "selectors" });
  const pair = el("div", { class: "heat-pair" });
  const maps = [];

  function sliceIndex() {
    let flat = 0;
    chosen.forEach((c, i) => { flat = flat * a.lead[i] + c; });
    return flat;
  }
  function redraw() { for (const m of maps) m.draw(); }

  a.lead.forEach((size, i) => {
    const input = el("input", { type: "number", min: 0, max: size - 1, value: 0, "aria-label": names[i], class: "slice-axis" });
    input.addEventListener("input", () => {
      chosen[i] = Math.max(0, Math.min(size - 1, Math.floor(Number(input.value) || 0)));
      redraw();
    });
    selectors.append(el("label", {}, `${names[i]} `, input, ` of ${size}`), "  ");
  });
  if (a.stored < a.lead.reduce((x, y) => x * y, 1)) {
    selectors.append(el("span", { class: "muted" }, ` (the first ${a.stored} slices are kept in the page)`));
  }

  function map(title, key, sequential, hidden) {
    const holder = el("div", { class: "array map", "data-map": key }, el("div", { class: "title" }, title));
    const canvas = el("canvas", {});
    const hover = el("div", { class: "hover" }, hidden ? "hidden until you predict this node's gradient"
      : sequential ? "white 0 to blue 1; hover a cell to read it" : "blue < 0 < red; hover a cell to read it");
    holder.append(canvas, hover);
    const MARGIN = 34;
    let geometry = null;
    function draw() {
      const flat = sliceIndex();
      const slice = a.slices[flat];
      const g = canvas.getContext("2d");
      if (!slice) {
        canvas.width = 220; canvas.height = 30;
        g.fillStyle = "#6b7587"; g.font = "11px sans-serif";
        g.fillText("this slice is not kept in the page", 4, 18);
        geometry = null;
        return;
      }
      const rows = slice.rows, cols = slice.cols;
      const cell = Math.max(2, Math.min(30, Math.floor(512 / Math.max(rows, cols))));
      canvas.width = MARGIN + cols * cell + 2;
      canvas.height = MARGIN + rows * cell + 2;
      geometry = { slice, rows, cols, cell };
      canvas.dataset.cell = cell;  // for the tests: where a cell is
      canvas.dataset.margin = MARGIN;
      canvas.dataset.slice = slice.index.join(",");
      g.clearRect(0, 0, canvas.width, canvas.height);
      const values = slice[key];
      const emptyRows = new Set(slice.empty_rows || []);
      for (let i = 0; i < rows; i++) {
        // each row scaled to its own largest |value|: at T = 256 a row's weights are near 1/256,
        // and one large row would leave every other one white on a common scale
        let scale = 0;
        for (let j = 0; j < cols; j++) {
          const v = values[i * cols + j];
          if (slice.hidden[i * cols + j] !== "1" && v !== null && Number.isFinite(v)) scale = Math.max(scale, Math.abs(v));
        }
        if (emptyRows.has(i)) {  // a query that sees no key: a red bar in the margin
          g.fillStyle = "#c62828";
          g.fillRect(MARGIN - 8, MARGIN + i * cell - (cell < 4 ? 1 : 0), 7, Math.max(cell, 4));
        }
        for (let j = 0; j < cols; j++) {
          const k = i * cols + j, x = MARGIN + j * cell, y = MARGIN + i * cell;
          if (slice.hidden[k] === "1") {
            g.fillStyle = "#d5d8de";
            g.fillRect(x, y, cell, cell);
            if (cell >= 8) {
              g.strokeStyle = "#8a909c";
              g.beginPath();
              g.moveTo(x + 2, y + 2); g.lineTo(x + cell - 2, y + cell - 2);
              g.moveTo(x + cell - 2, y + 2); g.lineTo(x + 2, y + cell - 2);
              g.stroke();
            }
          } else {
            g.fillStyle = hidden ? "#e4e7ec" : colour(values[k], scale, sequential);
            g.fillRect(x, y, cell, cell);
          }
        }
      }
      // axes: keys along the top, queries down the left, a label every few cells when crowded
      g.fillStyle = "#3b4658"; g.font = "10px sans-serif";
      g.fillText("key →", MARGIN, 10);
      g.save(); g.translate(10, MARGIN + 34); g.rotate(-Math.PI / 2); g.fillText("query →", 0, 0); g.restore();
      let every = 1;  // a label every 1, 2, 4, 8, ... cells, at least 22 px apart (three digits)
      while (every * cell < (cols > 99 ? 22 : 14)) every *= 2;
      for (let j = 0; j < cols; j += every) {
        const label = D.tokens && slice.block[1] === 1 && cell >= 12 ? D.tokens[j] || String(j) : String(j * slice.block[1]);
        g.fillText(label.slice(0, 4), MARGIN + j * cell + 1, MARGIN - 4);
      }
      for (let i = 0; i < rows; i += every) {
        const label = D.tokens && slice.block[0] === 1 && cell >= 12 ? D.tokens[i] || String(i) : String(i * slice.block[0]);
        g.fillText(label.slice(0, 4), 14, MARGIN + i * cell + Math.min(cell, 12) - 2);
      }
    }
    canvas.addEventListener("mousemove", (event) => {
      if (!geometry) return;
      const { slice, rows, cols, cell } = geometry;
      const r = canvas.getBoundingClientRect();
      // from the canvas's own corner, inside its border (at 2 px a cell, the border is half a cell)
      const j = Math.floor((event.clientX - r.left - canvas.clientLeft - MARGIN) / cell);
      const i = Math.floor((event.clientY - r.top - canvas.clientTop - MARGIN) / cell);
      if (i < 0 || j < 0 || i >= rows || j >= cols) return;
      const k = i * cols + j;
      const [fq, fk] = slice.block;
      const query = fq === 1 ? `query ${i}${tokenOf(i)}` : `queries ${i * fq}-${(i + 1) * fq - 1}`;
      const keyText = fk === 1 ? `key ${j}${tokenOf(j)}` : `keys ${j * fk}-${(j + 1) * fk - 1}`;
      const masked = slice.hidden[k] === "1" ? " (masked)" : "";
      const value = hidden ? "hidden" : fmt(slice[key][k], 6);
      hover.textContent = `[${slice.index.concat([i, j]).join(", ")}] ${query} → ${keyText}: ${value}${masked}`
        + (fq > 1 || fk > 1 ? " (mean of the block)" : "");
    });
    maps.push({ draw });
    return holder;
  }

  pair.append(map("weights P = softmax(scores), each row scaled to its largest weight", "weights", true, false),
              map("dL/dscores (S: the scaled, masked scores), each row scaled to its largest |value|", "d_scores", false,
                  gradHidden));
  box.append(selectors);
  const first = a.slices[0];
  if (first && (first.rows < a.tq || first.cols < a.tk)) box.append(el("div", { class: "muted" }, `T = ${a.tq}: the `
    + `first ${first.rows} queries and ${first.cols} keys are kept, one cell each (never averaged).`));
  const empties = a.slices.map((sl) => (sl.empty_rows || []).length).reduce((x, y) => x + y, 0);
  if (empties) {
    const where = a.slices.filter((sl) => (sl.empty_rows || []).length).map((sl) =>
      `slice [${sl.index.join(", ")}]: quer${sl.empty_rows.length > 1 ? "ies" : "y"} ${sl.empty_rows.slice(0, 8).join(", ")}`
      + (sl.empty_rows.length > 8 ? ", ..." : "")).slice(0, 4).join("; ");
    box.append(el("div", { class: "empty-rows bad" }, `${empties} fully hidden row(s), marked red at the left: a query `
      + `that sees no key gets zero weights and no gradient (${where}). A mask that hides every key of a query is `
      + `usually a bug (a causal mask that also hides the diagonal hides all of query 0).`));
  }
  box.append(pair);  // below the words, so a fully hidden row is read before the maps
  redraw();
  return box;
}

// ---------------------------------------------------------------- the graph

const GAP_Y = 86, NODE_H = 60;
const graph = document.getElementById("graph");
const nodeElements = {}, edgeElements = [];

function nodeName(n) {
  if (n.kind === "op") return n.op;
  return n.kind === "param" ? "parameter" : n.kind === "const" ? "needs no gradient" : "leaf";
}

function headText(n) {
  return n.kind === "op" ? n.op + (n.label ? ` '${n.label}'` : "") : n.label || nodeName(n);
}

function secondText(n) {
  if (n.kind === "op") return n.module || shapeText(n.shape);
  return nodeName(n) + " " + shapeText(n.shape);
}

// every box as wide as the longest name needs (up to a limit), so no name is cut off
const NODE_W = Math.min(320, Math.max(136, ...D.nodes.map((n) => 7.2 * Math.max(headText(n).length, secondText(n).length) + 18)));
const GAP_X = NODE_W + 22;

function fitted(text) {
  const room = Math.floor((NODE_W - 14) / 6.6);
  return text.length > room ? text.slice(0, room - 1) + "…" : text;
}

function drawGraph() {
  const low = Math.min(...D.nodes.map((n) => n.x)), high = Math.max(...D.nodes.map((n) => n.x));
  const layers = Math.max(...D.nodes.map((n) => n.layer)) + 1;
  const width = (high - low) * GAP_X + NODE_W + 40, height = layers * GAP_Y + 20;
  graph.setAttribute("width", width);
  graph.setAttribute("height", height);
  const at = (n) => [20 + (n.x - low) * GAP_X + NODE_W / 2, 16 + n.layer * GAP_Y + NODE_H / 2];
  const defs = svg("defs");
  for (const [name, fill] of [["arrow", "#b7c0cd"], ["arrow-active", "#e08e00"], ["arrow-done", "#7dbb94"]]) {
    const marker = svg("marker", { id: name, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto" });
    marker.append(svg("path", { d: "M0,0 L10,5 L0,10 z", fill }));
    defs.append(marker);
  }
  graph.append(defs);
  // edges point the way gradients travel: from a consumer down to its input
  for (const e of D.edges) {
    const [x0, y0] = at(D.nodes[e.to]), [x1, y1] = at(D.nodes[e.from]);
    const start = y0 + NODE_H / 2, end = y1 - NODE_H / 2;
    const constant = D.nodes[e.from].kind === "const";
    const path = svg("path", { class: "edge" + (constant ? " constant" : ""), d: `M${x0},${start} C${x0},${start + 30} ${x1},${end - 30} ${x1},${end}`,
                               "marker-end": "url(#arrow)" });
    graph.append(path);
    edgeElements.push([e, path]);
  }
  for (const n of D.nodes) {
    const [cx, cy] = at(n);
    const g = svg("g", { class: `node ${n.kind}`, id: `node-${n.id}`, "data-id": n.id, transform: `translate(${cx - NODE_W / 2},${cy - NODE_H / 2})` });
    g.append(svg("rect", { width: NODE_W, height: NODE_H }));
    const title = svg("text", { x: 8, y: 14, class: "op" });
    title.textContent = fitted(headText(n));
    const second = svg("text", { x: 8, y: 27, class: "second" });
    second.textContent = fitted(secondText(n));
    const value = svg("text", { x: 8, y: 40, class: "value" });
    value.textContent = fitted(n.kind === "op" ? (n.value ? brief(n.value, "data") : shapeText(n.shape)) : brief(n.value, "data"));
    const norm = svg("text", { x: 8, y: 53, class: "norm" });
    const mark = svg("text", { x: NODE_W - 6, y: 53, "text-anchor": "end", class: "done-mark" });
    g.append(title, second, value, norm, mark);
    if (n.check || n.compare) {
      const flag = svg("text", { x: NODE_W - 6, y: 14, "text-anchor": "end", class: "flag" });
      g.append(flag);
    }
    const tip = svg("title");
    tip.textContent = [headText(n), n.module ? `module ${n.module}` : null, n.created_at,
      n.check ? `relative error ${fmt(n.check.relative_error, 3)}` : null,
      n.compare ? `compare: ${n.compare.verdict}` : null].filter(Boolean).join("\n");
    g.append(tip);
    g.addEventListener("click", () => { if (n.id in stepOfNode) go(stepOfNode[n.id] + 1); });
    graph.append(g);
    nodeElements[n.id] = { g, norm, mark };
  }
  if (D.checked) colourByCheck();
  if (D.compared) colourByCompare();
}

// compare mode (mt.debug.compare): the fill is the node's verdict against the reference: the culprit
// red (the first one outlined), the nodes that only inherited its error orange, agreeing ones green,
// grey where the reference has no node like it; done is the ✓ and the outline, as in check mode.
const VERDICT_CLASS = { culprit: "failed", inherited: "inherited", agrees: "passed", "no counterpart": "unchecked" };
function colourByCompare() {
  let first = null;
  for (const n of D.nodes) {
    if (n.kind !== "op" || !n.compare) continue;
    const { g } = nodeElements[n.id];
    g.classList.add(VERDICT_CLASS[n.compare.verdict] || "unchecked");
    g.querySelector("text.flag").textContent = n.compare.verdict === "culprit" ? "culprit" : "";
    if (n.compare.first) first = n;
  }
  if (first) nodeElements[first.id].g.classList.add("worst");
  const banner = document.getElementById("banner");
  banner.className = first ? "bad" : "";
  banner.append(el("pre", { class: "compare-summary" }, D.compared),
    first && first.id in stepOfNode ? el("button", { onclick: () => go(stepOfNode[first.id] + 1) }, "go to it") : "",
    el("div", { class: "legend" }, "Fill: ", el("span", { class: "key failed" }), " culprit ",
       el("span", { class: "key inherited" }), " inherited (departs only because what it received does) ",
       el("span", { class: "key passed" }), " agrees ", el("span", { class: "key unchecked" }),
       " no counterpart in the reference. ✓ and a dark outline: done."));
}

// check mode: the fill says the check alone (green passed, red failed, grey not checked); being
// done is shown as in the other modes, by the ✓ and the outline, never by the fill.
let worst = null;
function colourByCheck() {
  for (const n of D.nodes) {
    if (!n.check) continue;
    if (worst === null || errorOf(n) > errorOf(worst)) worst = n;
  }
  for (const n of D.nodes) {
    if (n.kind !== "op") continue;
    const { g } = nodeElements[n.id];
    g.classList.add(!n.check ? "unchecked" : n.check.passed ? "passed" : "failed");
    if (n.check) g.querySelector("text.flag").textContent = n === worst && !n.check.passed ? "worst" : n.check.passed ? "" : "wrong";
  }
  if (worst) nodeElements[worst.id].g.classList.add("worst");
  const banner = document.getElementById("banner");
  const failed = D.nodes.filter((n) => n.check && !n.check.passed);
  if (!worst) { banner.textContent = "Check mode: no op had an input that requires grad."; return; }
  banner.className = failed.length ? "bad" : "";
  banner.append(
    failed.length ? `Check mode: ${failed.length} op(s) disagree with finite differences. The worst: `
                  : "Check mode: every op's backward agrees with finite differences. The largest error: ",
    el("b", {}, worst.op), worst.module ? ` in ${worst.module}` : "", worst.check.created_at ? ` made at ${worst.check.created_at}` : "",
    `, relative error ${fmt(worst.check.relative_error, 3)} (|analytic - numeric| / (|numeric| + atol/rtol); at most 0.001 passes).`,
    worst.id in stepOfNode ? el("button", { onclick: () => go(stepOfNode[worst.id] + 1) }, "go to it") : "",
    el("div", { class: "legend" }, "Fill: ", el("span", { class: "key passed" }), " passed ", el("span", { class: "key failed" }),
       " failed ", el("span", { class: "key unchecked" }), " not checked (no input needs a gradient). ✓ and a dark outline: done."));
}

// backward stopped at an op whose backward returned a gradient of the wrong shape: say so above
// everything, mark the op, and keep the steps that ran.
function showStopped() {
  const banner = document.getElementById("banner");
  banner.className = "bad";
  const stop = D.stopped;
  banner.append(el("div", { id: "stopped" }, `Backward stopped after step ${stop.step}: `, el("b", {}, stop.op),
    ".backward returned a gradient of the wrong shape.", stop.node !== null && stop.node !== undefined
      ? el("button", { onclick: () => go(Math.min(N, stop.step)) }, "go to the last step that ran") : "",
    el("pre", { class: "report" }, stop.message)));
  if (stop.node !== null && stop.node !== undefined && nodeElements[stop.node]) {
    nodeElements[stop.node].g.classList.add("failed", "worst");
  }
}

function errorOf(n) {
  return n.check.relative_error === null ? Infinity : n.check.relative_error;
}

// ---------------------------------------------------------------- predict mode

// A gradient is known once every step that sends to it was answered (guessed or revealed):
// before that, predict mode shows no number, norm or colour of it.
function known(nodeId) {
  if (!D.predict) return true;
  const senders = D.nodes[nodeId].senders || [];
  return senders.every((s) => guesses[s] !== null || !D.steps[s].predict.length);
}

function unanswered(nodeId) {
  return (D.nodes[nodeId].senders || []).filter((s) => guesses[s] === null && D.steps[s].predict.length);
}

function predictBox(step, index) {
  const target = step.predict[asked[index]];
  const entry = step.grad_inputs[target.input];
  const where = `[${target.index.join(", ")}]`;
  const answer = el("input", { type: "text", id: "guess", placeholder: "e.g. -4/2 or 1e-3", "aria-label": "your guess" });
  const why = el("div", { class: "why", id: "why" });
  const choices = el("div", { class: "choices" }, "ask about: ");
  step.predict.forEach((t, i) => {
    choices.append(el("button", { class: "choice" + (i === asked[index] ? " chosen" : ""), "data-input": t.input,
      onclick: () => { asked[index] = i; render(); } }, `dL/d${t.name}`), " ");
  });
  const box = el("div", { class: "predict" },
    step.predict.length > 1 ? choices : null,
    el("div", {}, `Predict: the gradient this node sends to its input ${target.name} (→ ${inputName(entry)}) at `,
       el("b", { id: "question" }, `dL/d${target.name}${where}`), ` (shape ${shapeText(entry.shape)})`),
    el("div", { class: "muted" }, "Use grad_output, the forward values and the saved arrays; within 1% counts. "
      + "Type a number or a sum: -4/2, 1e-3, 0.5*(1-0.25)."),
    firstMiss[index] ? el("div", { class: "verdict wrong", id: "second-try" }, `Not quite: ${firstMiss[index]} is not `
      + "within 1%. One more try (or reveal)."): "",
    answer, " ",
    el("button", { id: "check-guess", onclick: () => judge(index, answer.value, why) }, "check"), " ",
    el("button", { id: "reveal", onclick: () => { guesses[index] = "revealed"; update(); updateScore(); } }, "reveal"),
    why);
  answer.addEventListener("keydown", (event) => { if (event.key === "Enter") judge(index, answer.value, why); });
  return box;
}

function judge(index, text, why) {
  const parsed = parseNumber(text);
  if (parsed.error) { why.textContent = `Cannot read "${text.trim()}": ${parsed.error}.`; return; }
  const value = D.steps[index].predict[asked[index]].value;
  const right = value !== null && Math.abs(parsed.value - value) <= TOLERANCE * Math.abs(value) + 1e-4;
  said[index] = `${text.trim()}` + (text.trim() === String(parsed.value) ? "" : ` = ${fmt(parsed.value, 6)}`);
  if (!right && !firstMiss[index]) {  // a first wrong answer: say so, show nothing, allow a second try
    firstMiss[index] = said[index];
    update();
    return;
  }
  guesses[index] = right ? "right" : "wrong";
  update();
  updateScore();
}

function updateScore() {
  if (!D.predict) return;
  const tried = guesses.filter((g) => g !== null).length, right = guesses.filter((g) => g === "right").length;
  document.getElementById("score").textContent = `score ${right} / ${tried}` + (tried < N ? ` (${N - tried} to go)` : "");
}

function hiddenAt(index) {
  return D.predict && D.steps[index].predict.length > 0 && guesses[index] === null;
}

function inputName(entry) {
  const n = D.nodes[entry.to];
  if (n.kind === "const") return "needs no gradient";
  return n.kind === "op" ? `${n.op}${n.label ? ` '${n.label}'` : ""}` : `${nodeName(n)}${n.label ? ` '${n.label}'` : ""}`;
}

// ---------------------------------------------------------------- the panel

function renderStart(panel) {
  panel.append(el("h2", {}, "Before the first step"),
    el("p", {}, `loss = ${fmt(D.loss.data ? D.loss.data[0] : null, 6)}. Backward starts from dL/dL = 1 and visits the `
       + `${N} nodes of the graph in the order of mt.debug.backward_steps, each after every node that sends it a gradient. `
       + `Step k here is steps[k-1] in Python and line k-1 of mt.debug.trace.`),
    el("p", {}, "→ / ← step, Home / End jump; or use the buttons and the slider. Click a node to go to it."),
    el("p", { class: "legend" }, "Boxes are ops (with the module that made them), rounded ones leaves ",
       el("span", { class: "key", style: "background:#fdf8e3" }),
       " and parameters ", el("span", { class: "key", style: "background:#fcefd9;border-style:dashed" }),
       "; greyed ", el("span", { class: "key", style: "background:#f0f1f3;border-style:dotted" }),
       " inputs that need no gradient. Each box shows its forward value (data) and, once it has it, its gradient. "
       + "Arrows point the way gradients flow. A done node gets a ✓"
       + (D.checked ? " and a dark outline (the fill is the check's result)." : " and turns green.")));
  if (D.predict) panel.append(el("p", { class: "predict" }, "Predict mode: at each node, compute one element of the gradient "
    + "it sends to an input (pick which) before you see it. No gradient is shown before you predicted or revealed every "
    + "step that makes it. Your score is at the top right."));
}

function hiddenGradOutput(index, node) {
  const missing = unanswered(node.id);
  return el("div", { class: "array muted hidden-grad", id: "hidden-grad-output" },
    `grad_output: hidden: it is what step${missing.length > 1 ? "s" : ""} ${missing.map((s) => s + 1).join(", ")} `
    + "send here; predict those first, or ",
    el("button", { id: "reveal-earlier", onclick: () => { for (const s of missing) guesses[s] = "revealed"; update(); updateScore(); } },
       "reveal them"));
}

function render() {
  const panel = document.getElementById("panel");
  panel.replaceChildren();
  if (position === 0) { renderStart(panel); return; }
  const index = position - 1, step = D.steps[index], node = D.nodes[step.node];
  panel.append(el("h2", {}, `step ${index + 1} of ${N}: `, el("span", { class: "op-name" }, step.op),
                  step.label ? el("span", { class: "label" }, ` '${step.label}'`) : null));
  if (step.module) panel.append(el("div", { class: "module" }, `module ${step.module}` + (node.module_class ? ` (${node.module_class})` : "")));
  panel.append(step.created_at ? el("div", { class: "where" }, step.created_at)
    : el("div", { class: "muted" }, "where it was made: not recorded (a node made by a custom tool outside minitensor's ops)"));
  panel.append(el("div", { class: "muted" }, `output shape ${shapeText(node.shape)}; inputs `
    + step.grad_inputs.map((e) => `${e.name} ${shapeText(e.shape)}`).join(", ") + `; steps[${index}] in Python`));
  if (node.check) {
    const c = node.check;
    panel.append(el("h3", {}, "gradcheck of this op alone"),
      el("div", {}, el("span", { class: c.passed ? "pass" : "fail" }, c.passed ? "passed" : "FAILED"),
         `  relative error ${fmt(c.relative_error, 3)}`),
      c.report ? el("div", { class: "report" }, c.report) : "");
  }
  if (node.compare) {
    const c = node.compare;
    panel.append(el("h3", {}, "compared with the reference"),
      el("div", {}, el("span", { class: c.verdict === "culprit" ? "fail" : c.verdict === "agrees" ? "pass" : "" },
         c.verdict), c.where ? `  (${c.where})` : ""),
      c.worst ? el("div", { class: "report" }, c.worst) : "");
  }
  const outputKnown = known(node.id);
  if (step.attention) {
    panel.append(el("h3", {}, "attention: weights and dL/dscores, one slice at a time (× = masked)"),
                 shapeExplained(step, node), attentionMaps(step, node, hiddenAt(index) || !outputKnown));
  }
  if (node.value) panel.append(el("h3", {}, "forward value of this node's output"), arrayView("data", node.value));
  panel.append(el("h3", {}, "grad_output: dL/d(this node's output)"));
  panel.append(outputKnown ? arrayView("grad_output", step.grad_output) : hiddenGradOutput(index, node));
  const hidden = hiddenAt(index);
  panel.append(el("h3", {}, "grad_inputs: what it sends to each input"));
  if (D.predict && step.predict.length) {
    if (hidden) panel.append(outputKnown ? predictBox(step, index)
      : el("div", { class: "predict muted" }, "To predict here you need grad_output: answer or reveal the steps above first."));
    else {
      const verdict = guesses[index];
      const target = step.predict[asked[index]];
      const value = fmt(target.value, 6);
      const q = `dL/d${target.name}[${target.index.join(", ")}]`;
      panel.append(el("div", { class: `verdict ${verdict}` }, verdict === "right" ? `Right${firstMiss[index] ? " on the second try" : ""}: ${said[index]} is within 1% of ${q} = ${value}.`
        : verdict === "wrong" ? `Not quite, twice: you said ${firstMiss[index]}, then ${said[index]}, but ${q} = ${value}.`
        : `Revealed: ${q} = ${value}.`));
    }
  }
  step.grad_inputs.forEach((entry, i) => {
    const title = `${entry.name} → ${inputName(entry)}`;
    if (!entry.grad) { panel.append(el("div", { class: "array muted no-grad" }, `${title}: no gradient (None): it needs none`)); return; }
    if (hidden) { panel.append(el("div", { class: "array muted hidden-grad" }, `${title}: hidden until you predict`)); return; }
    const box = arrayView(`dL/d${title}`, entry.grad);
    if (entry.summed_axes) {
      box.insertBefore(el("div", { class: "summed" }, `unbroadcast: summed axes (${entry.summed_axes.join(", ")}): `
        + `${shapeText(entry.raw_shape)} → ${shapeText(entry.grad.shape)}`), box.children[2] || null);
    }
    box.classList.add("grad-input");
    box.dataset.input = i;
    panel.append(box);
  });
  if (step.saved.length) {
    panel.append(el("h3", {}, "saved for backward"));
    step.saved.forEach((rec) => panel.append(arrayView(rec.name, rec)));
  } else panel.append(el("h3", {}, "saved for backward: nothing"));
}

// ---------------------------------------------------------------- the timeline

function update() {
  const current = position - 1;
  for (const n of D.nodes) {
    const { g, norm, mark } = nodeElements[n.id];
    const doneAt = n.done_at === undefined ? Infinity : n.done_at;
    const ownStep = stepOfNode[n.id];
    const done = n.kind === "op" ? ownStep !== undefined && ownStep < current : doneAt <= current;
    g.classList.toggle("done", done);
    g.classList.toggle("current", ownStep === current);
    mark.textContent = done ? "✓" : "";
    const received = n.kind === "op" ? ownStep !== undefined && ownStep <= current : done;
    norm.textContent = !received || n.grad === undefined ? "" : known(n.id) ? fitted(brief(n.grad, "grad")) : "grad ?";
  }
  const active = current >= 0 ? D.steps[current].node : null;
  for (const [e, path] of edgeElements) {
    const on = e.to === active;
    const done = current >= 0 && stepOfNode[e.to] !== undefined && stepOfNode[e.to] < current;
    path.classList.toggle("active", on);
    path.classList.toggle("done", done && !on);
    path.setAttribute("marker-end", on ? "url(#arrow-active)" : done ? "url(#arrow-done)" : "url(#arrow)");
    if (on) path.parentNode.appendChild(path);
  }
  if (active !== null) {
    for (const e of D.edges) if (e.to === active) nodeElements[e.from].g.classList.add("target");
    for (const n of D.nodes) if (!D.edges.some((e) => e.to === active && e.from === n.id)) nodeElements[n.id].g.classList.remove("target");
    nodeElements[active].g.scrollIntoView({ block: "center", inline: "center" });
  } else {
    for (const n of D.nodes) nodeElements[n.id].g.classList.remove("target");
    document.getElementById("graph-pane").scrollTo(0, 0);
  }
  document.getElementById("slider").value = position;
  document.getElementById("counter").textContent = position === 0 ? `start (0 / ${N})` : `step ${position} / ${N}`;
  document.body.dataset.step = position;
  render();
}

function go(target) {
  const next = Math.max(0, Math.min(N, target));
  if (next === position) return;
  position = next;
  update();
}

document.getElementById("slider").max = N;
document.getElementById("slider").addEventListener("input", (event) => go(Number(event.target.value)));
document.getElementById("first").addEventListener("click", () => go(0));
document.getElementById("prev").addEventListener("click", () => go(position - 1));
document.getElementById("next").addEventListener("click", () => go(position + 1));
document.getElementById("last").addEventListener("click", () => go(N));
document.addEventListener("keydown", (event) => {
  const typing = event.target instanceof HTMLInputElement && event.target.type !== "range";
  if (typing) return;
  const moves = { ArrowRight: position + 1, ArrowDown: position + 1, ArrowLeft: position - 1, ArrowUp: position - 1, Home: 0, End: N };
  if (event.key in moves) { event.preventDefault(); go(moves[event.key]); }
});

if (D.checked || D.compared) document.body.classList.add("check-mode");
drawGraph();
if (D.stopped) showStopped();
updateScore();
update();
