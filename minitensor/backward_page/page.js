// The backward page's script: plain JavaScript, no library, so the page stays one file that
// opens from disk. It reads the JSON written by minitensor/backward_page/__init__.py and draws
// the graph (SVG), the timeline and the current node's panel (numbers and canvas heatmaps).
"use strict";

const D = JSON.parse(document.getElementById("data").textContent);
const N = D.steps.length;
const SMALL = 48;            // arrays up to this many elements are shown as numbers
const TOLERANCE = 0.01;      // predict mode: a guess within 1% (or 1e-4) of the value counts
const SVG = "http://www.w3.org/2000/svg";

let position = 0;            // 0: before the first node; k: the k-th node's backward has run
const guesses = D.steps.map(() => null);   // predict mode: null, "right", "wrong" or "revealed"
const stepOfNode = {};
D.steps.forEach((s, i) => { stepOfNode[s.node] = i; });

// ---------------------------------------------------------------- numbers

function fmt(x, digits) {
  if (x === null || x === undefined) return "NaN/Inf";
  if (x === 0) return "0";
  const a = Math.abs(x);
  if (a >= 1e5 || a < 1e-3) return x.toExponential((digits || 5) - 1);
  return String(Number(x.toPrecision(digits || 5)));
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
  else if (size <= SMALL && !(options && options.hidden)) box.append(el("pre", {}, nested(rec.data, rec.shape)));
  else box.append(heatmap(rec, options || {}));
  return box;
}

// ---------------------------------------------------------------- the graph

const NODE_W = 136, NODE_H = 46, GAP_X = 158, GAP_Y = 74;
const graph = document.getElementById("graph");
const nodeElements = {}, edgeElements = [];

function nodeName(n) {
  if (n.kind === "op") return n.op;
  return n.kind === "param" ? "parameter" : "leaf";
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
    const path = svg("path", { class: "edge", d: `M${x0},${start} C${x0},${start + 30} ${x1},${end - 30} ${x1},${end}`,
                               "marker-end": "url(#arrow)" });
    graph.append(path);
    edgeElements.push([e, path]);
  }
  for (const n of D.nodes) {
    const [cx, cy] = at(n);
    const g = svg("g", { class: `node ${n.kind}`, id: `node-${n.id}`, transform: `translate(${cx - NODE_W / 2},${cy - NODE_H / 2})` });
    g.append(svg("rect", { width: NODE_W, height: NODE_H }));
    const title = svg("text", { x: 8, y: 15, class: "op" });
    // ops: "Op 'label'" over the shape; leaves: the label (or kind) over "kind shape"
    const head = n.kind === "op" ? n.op + (n.label ? ` '${n.label}'` : "") : n.label || nodeName(n);
    title.textContent = head.length > 21 ? head.slice(0, 20) + "…" : head;
    const shape = svg("text", { x: 8, y: 28 });
    shape.textContent = (n.kind === "op" || !n.label ? "" : nodeName(n) + " ") + shapeText(n.shape);
    const norm = svg("text", { x: 8, y: 41, class: "norm" });
    g.append(title, shape, norm);
    if (n.check) {
      const flag = svg("text", { x: NODE_W - 6, y: 15, "text-anchor": "end", class: "flag" });
      g.append(flag);
    }
    const tip = svg("title");
    tip.textContent = head + "\n" + (n.created_at || "") + (n.check ? `\nrelative error ${fmt(n.check.relative_error, 3)}` : "");
    g.append(tip);
    g.addEventListener("click", () => { if (n.id in stepOfNode) go(stepOfNode[n.id] + 1); });
    graph.append(g);
    nodeElements[n.id] = { g, norm };
  }
  if (D.checked) colourByCheck();
}

// check mode: green (tiny relative error) through yellow to red (1e-2 and above)
function checkColour(error) {
  const t = Math.max(0, Math.min(1, (Math.log10(Math.max(error, 1e-12)) + 10) / 8));
  return `hsl(${Math.round(120 * (1 - t))}, 70%, 72%)`;
}

let worst = null;
function colourByCheck() {
  for (const n of D.nodes) {
    if (!n.check) continue;
    if (worst === null || n.check.relative_error > worst.check.relative_error) worst = n;
  }
  for (const n of D.nodes) {
    if (!n.check) continue;
    const { g } = nodeElements[n.id];
    g.classList.add("checked");
    g.querySelector("rect").style.fill = checkColour(n.check.relative_error);
    if (!n.check.passed) g.classList.add("failed");
    g.querySelector("text.flag").textContent = n === worst ? "worst" : n.check.passed ? "" : "wrong";
  }
  if (worst) nodeElements[worst.id].g.classList.add("worst");
  const banner = document.getElementById("banner");
  const failed = D.nodes.filter((n) => n.check && !n.check.passed);
  if (!worst) { banner.textContent = "Check mode: no op had an input that requires grad."; return; }
  banner.className = failed.length ? "bad" : "";
  banner.append(
    failed.length ? `Check mode: ${failed.length} op(s) disagree with finite differences. The worst: `
                  : "Check mode: every op's backward agrees with finite differences. The largest error: ",
    el("b", {}, worst.op), worst.check.created_at ? ` made at ${worst.check.created_at}` : "",
    `, relative error ${fmt(worst.check.relative_error, 3)}.`,
    worst.id in stepOfNode ? el("button", { onclick: () => go(stepOfNode[worst.id] + 1) }, "go to it") : "");
}

// ---------------------------------------------------------------- the panel

function predictBox(step, index) {
  const target = step.predict;
  const input = step.grad_inputs[target.input];
  const where = `[${target.index.join(", ")}]`;
  const answer = el("input", { type: "text", id: "guess", placeholder: "your value", "aria-label": "your guess" });
  const box = el("div", { class: "predict" },
    el("div", {}, `Predict: the gradient this node sends to input ${target.input} `,
       el("b", {}, `dL/d input${target.input}${where}`), ` (shape ${shapeText(input.shape)})`),
    el("div", { class: "muted" }, "Use grad_output and the saved arrays below; within 1% counts."),
    answer, " ",
    el("button", { id: "check-guess", onclick: () => judge(index, answer.value) }, "check"), " ",
    el("button", { id: "reveal", onclick: () => { guesses[index] = "revealed"; render(); updateScore(); } }, "reveal"));
  answer.addEventListener("keydown", (event) => { if (event.key === "Enter") judge(index, answer.value); });
  return box;
}

function judge(index, text) {
  const guess = Number(text.trim());
  if (text.trim() === "" || !Number.isFinite(guess)) return;
  const value = D.steps[index].predict.value;
  guesses[index] = Math.abs(guess - value) <= TOLERANCE * Math.abs(value) + 1e-4 ? "right" : "wrong";
  guesses[index + "-text"] = text.trim();
  render();
  updateScore();
}

function updateScore() {
  if (!D.predict) return;
  const tried = guesses.filter((g) => g !== null).length, right = guesses.filter((g) => g === "right").length;
  document.getElementById("score").textContent = `score ${right} / ${tried}` + (tried < N ? ` (${N - tried} to go)` : "");
}

function hiddenAt(index) {
  return D.predict && D.steps[index].predict && guesses[index] === null;
}

function inputName(entry) {
  if (entry.to === null) return "(needs no gradient)";
  const n = D.nodes[entry.to];
  return n.kind === "op" ? `${n.op}${n.label ? ` '${n.label}'` : ""}` : `${nodeName(n)}${n.label ? ` '${n.label}'` : ""}`;
}

function renderStart(panel) {
  panel.append(el("h2", {}, "Before the first node"),
    el("p", {}, `loss = ${fmt(D.loss.data ? D.loss.data[0] : null, 6)}. Backward starts from dL/dL = 1 and visits the `
       + `${N} nodes of the graph in the order of mt.debug.backward_steps, each after every node that sends it a gradient.`),
    el("p", {}, "→ / ← step, Home / End jump; or use the buttons and the slider. Click a node to go to it."),
    el("p", { class: "legend" }, "Boxes are ops, rounded ones leaves ", el("span", { class: "key", style: "background:#fdf8e3" }),
       " and parameters ", el("span", { class: "key", style: "background:#fcefd9;border-style:dashed" }),
       ". Arrows point the way gradients flow. Done nodes turn green and show the norm of the gradient they received."));
  if (D.predict) panel.append(el("p", { class: "predict" }, "Predict mode: at each node, compute one element of a gradient "
    + "before you see it. Your score is at the top right."));
}

function render() {
  const panel = document.getElementById("panel");
  panel.replaceChildren();
  if (position === 0) { renderStart(panel); return; }
  const index = position - 1, step = D.steps[index], node = D.nodes[step.node];
  panel.append(el("h2", {}, `#${index} ${step.op}`, step.label ? el("span", { class: "label" }, ` '${step.label}'`) : null));
  panel.append(step.created_at ? el("div", { class: "where" }, step.created_at)
    : el("div", { class: "muted" }, "where it was made: not recorded (a node made by a custom tool outside minitensor's ops)"));
  panel.append(el("div", { class: "muted" }, `output shape ${shapeText(node.shape)}`));
  if (node.check) {
    const c = node.check;
    panel.append(el("h3", {}, "gradcheck of this op alone"),
      el("div", {}, el("span", { class: c.passed ? "pass" : "fail" }, c.passed ? "passed" : "FAILED"),
         `  relative error ${fmt(c.relative_error, 3)}`),
      c.report ? el("div", { class: "report" }, c.report) : "");
  }
  panel.append(el("h3", {}, "grad_output: dL/d(this node's output)"), arrayView("grad_output", step.grad_output));
  if (step.attention) {
    const a = step.attention;
    panel.append(el("h3", {}, "attention: weights and dL/dscores (T x T per head; × = masked)"),
      el("div", { class: "heat-pair attention" },
        arrayView("weights P = softmax(scores)", a.weights, { sequential: true, hidden: a.hidden, cell: 30, width: 220 }),
        arrayView("dL/dscores = P (dP - rowsum(dout out))", a.d_scores, { hidden: a.hidden, cell: 30, width: 220 })));
  }
  const hidden = hiddenAt(index);
  panel.append(el("h3", {}, "grad_inputs: what it sends to each input"));
  if (D.predict && step.predict) {
    if (hidden) panel.append(predictBox(step, index));
    else {
      const verdict = guesses[index];
      const said = guesses[index + "-text"];
      panel.append(el("div", { class: `verdict ${verdict}` }, verdict === "right" ? `Right: ${said} is within 1% of ${fmt(step.predict.value, 6)}.`
        : verdict === "wrong" ? `Not quite: ${said}, but the value is ${fmt(step.predict.value, 6)}.`
        : `Revealed: the value is ${fmt(step.predict.value, 6)}.`));
    }
  }
  step.grad_inputs.forEach((entry, i) => {
    const title = `input ${i} → ${inputName(entry)}`;
    if (!entry.grad) { panel.append(el("div", { class: "array muted" }, `${title}: no gradient (None)`)); return; }
    if (hidden) { panel.append(el("div", { class: "array muted hidden-grad" }, `${title}: hidden until you predict`)); return; }
    const box = arrayView(title, entry.grad);
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
    step.saved.forEach((rec, i) => panel.append(arrayView(`saved[${i}]`, rec)));
  } else panel.append(el("h3", {}, "saved for backward: nothing"));
}

// ---------------------------------------------------------------- the timeline

function update() {
  const current = position - 1;
  for (const n of D.nodes) {
    const { g, norm } = nodeElements[n.id];
    const doneAt = n.done_at === undefined ? Infinity : n.done_at;
    const ownStep = stepOfNode[n.id];
    const done = n.kind === "op" ? ownStep !== undefined && ownStep < current : doneAt <= current;
    g.classList.toggle("done", done);
    g.classList.toggle("current", ownStep === current);
    const received = n.kind === "op" ? ownStep !== undefined && ownStep <= current : done;
    norm.textContent = received && n.grad_norm !== undefined ? `|grad| ${fmt(n.grad_norm, 4)}` : "";
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

drawGraph();
updateScore();
update();
