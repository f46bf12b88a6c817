// The image page's drawing canvas (pages/ui/drawing.py mounts it): a side x side grid of cells, each one cell of
// the grid the model's image is made from, painted with a pen (mouse, touch or stylus: pointer events) or rubbed
// out with an eraser. Each finished stroke, undo or clear sends the whole grid to the page as its link value
// (core/serving/drawing_link.py: packed bits, row by row, first cell in the high bit, URL-safe base64 unpadded).
// The canvas keeps its own drawing between the page's reruns: it takes the page's only when the page replaces it
// (a template chosen, `reset` changed) or when it is first drawn (a link opened).

const HISTORY = 100; // undo steps kept

function encode(grid) {
  const bytes = new Uint8Array(Math.ceil(grid.length / 8));
  grid.forEach((ink, i) => { if (ink) bytes[i >> 3] |= 0x80 >> (i & 7); });
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function decode(text, side) {
  const binary = atob(text.replace(/-/g, "+").replace(/_/g, "/"));
  const grid = new Uint8Array(side * side);
  for (let i = 0; i < grid.length; i++) grid[i] = (binary.charCodeAt(i >> 3) >> (7 - (i & 7))) & 1;
  return grid;
}

// The tools keep their place beside the canvas at any width (wrapped below it, they left a narrow column's view).
const STYLE = `.al-drawing { display: flex; gap: 0.75rem; align-items: flex-start; }
.al-drawing canvas { display: block; width: min(calc(100% - 6.5rem), 20rem); aspect-ratio: 1; touch-action: none;
  cursor: crosshair; border: 1px solid rgba(128, 128, 128, 0.5); border-radius: 4px; }
.al-drawing-tools { display: flex; flex-direction: column; gap: 0.4rem; width: 5.75rem; }
.al-drawing-tools button { font: 0.9rem var(--st-font, sans-serif); padding: 0.3rem 0.8rem; text-align: left;
  color: var(--st-text-color, #31333F); background: var(--st-background-color, #fff);
  border: 1px solid rgba(128, 128, 128, 0.45); border-radius: 0.5rem; cursor: pointer; }
.al-drawing-tools button:hover:not(:disabled) { border-color: var(--st-primary-color, #ff4b4b); }
.al-drawing-tools button[aria-pressed="true"] { border-color: var(--st-primary-color, #ff4b4b);
  box-shadow: inset 0 0 0 1px var(--st-primary-color, #ff4b4b); }
.al-drawing-tools button:disabled { opacity: 0.45; cursor: default; }`;

function addStyle() { // once per page
  if (document.getElementById("al-drawing-style")) return;
  const style = document.createElement("style");
  style.id = "al-drawing-style";
  style.textContent = STYLE;
  document.head.appendChild(style);
}

function button(label, title, action) {
  const element = document.createElement("button");
  element.type = "button";
  element.textContent = label;
  element.title = title;
  element.addEventListener("click", action);
  return element;
}

function build(parent) {
  addStyle();
  const root = document.createElement("div");
  root.className = "al-drawing";
  const canvas = document.createElement("canvas");
  canvas.setAttribute("role", "img");
  const tools = document.createElement("div");
  tools.className = "al-drawing-tools";
  root.append(canvas, tools);
  parent.appendChild(root);
  const state = {root, canvas, history: [], erasing: false, stroke: null};
  state.pen = button("Pen", "Paint cells", () => setTool(state, false));
  state.eraser = button("Eraser", "Rub cells out", () => setTool(state, true));
  state.undo = button("↶ Undo", "Take back the last stroke, clear or new start", () => undo(state));
  state.clear = button("✕ Clear", "Rub out the whole drawing", () => clear(state));
  tools.append(state.pen, state.eraser, state.undo, state.clear);
  canvas.addEventListener("pointerdown", event => strokeStart(state, event));
  canvas.addEventListener("pointermove", event => strokeMove(state, event));
  canvas.addEventListener("pointerup", () => strokeEnd(state));
  canvas.addEventListener("pointercancel", () => strokeEnd(state));
  new ResizeObserver(() => { if (state.grid) render(state); }).observe(canvas);
  setTool(state, false);
  return state;
}

function setTool(state, erasing) {
  state.erasing = erasing;
  state.pen.setAttribute("aria-pressed", String(!erasing));
  state.eraser.setAttribute("aria-pressed", String(erasing));
}

function cellAt(state, event) { // [row, column] under the pointer, or null outside the grid
  const bounds = state.canvas.getBoundingClientRect();
  const column = Math.floor((event.clientX - bounds.left) / bounds.width * state.side);
  const row = Math.floor((event.clientY - bounds.top) / bounds.height * state.side);
  return row >= 0 && row < state.side && column >= 0 && column < state.side ? [row, column] : null;
}

function paintLine(state, from, to) { // every cell on the line between two cells (Bresenham), so a fast stroke has no gaps
  let [r, c] = from;
  const [r1, c1] = to, dr = Math.abs(r1 - r), dc = Math.abs(c1 - c), sr = r < r1 ? 1 : -1, sc = c < c1 ? 1 : -1;
  let error = dc - dr;
  for (;;) {
    state.grid[r * state.side + c] = state.erasing ? 0 : 1;
    if (r === r1 && c === c1) return;
    const twice = 2 * error;
    if (twice > -dr) { error -= dr; c += sc; }
    if (twice < dc) { error += dc; r += sr; }
  }
}

function strokeStart(state, event) {
  if (event.pointerType === "mouse" && event.button !== 0) return;
  event.preventDefault();
  state.canvas.setPointerCapture(event.pointerId);
  state.stroke = {before: encode(state.grid), last: cellAt(state, event)};
  if (state.stroke.last) paintLine(state, state.stroke.last, state.stroke.last);
  render(state);
}

function strokeMove(state, event) {
  if (!state.stroke) return;
  for (const point of event.getCoalescedEvents ? event.getCoalescedEvents() : [event]) {
    const cell = cellAt(state, point);
    if (cell) paintLine(state, state.stroke.last || cell, cell);
    state.stroke.last = cell;
  }
  render(state);
}

function strokeEnd(state) {
  if (!state.stroke) return;
  const {before} = state.stroke;
  state.stroke = null;
  if (encode(state.grid) !== before) commit(state, before);
}

function commit(state, before) { // a change made: `before` can be undone to; the page hears of the new drawing
  state.history.push(before);
  if (state.history.length > HISTORY) state.history.shift();
  send(state);
}

function undo(state) {
  if (!state.history.length) return;
  state.grid = decode(state.history.pop(), state.side);
  send(state);
}

function clear(state) {
  if (!state.grid.some(ink => ink)) return;
  const before = encode(state.grid);
  state.grid.fill(0);
  commit(state, before);
}

function send(state) {
  render(state);
  state.setTriggerValue("cells", encode(state.grid));
}

function render(state) {
  const {canvas, side, grid} = state;
  const ratio = window.devicePixelRatio || 1;
  const cell = Math.max(1, Math.floor(canvas.clientWidth * ratio / side)); // whole device pixels a cell: crisp edges
  canvas.width = canvas.height = cell * side;
  const context = canvas.getContext("2d");
  context.fillStyle = state.background;
  context.fillRect(0, 0, canvas.width, canvas.height);
  context.fillStyle = state.ink;
  for (let i = 0; i < grid.length; i++)
    if (grid[i]) context.fillRect((i % side) * cell, Math.floor(i / side) * cell, cell, cell);
  context.strokeStyle = "rgba(128, 128, 128, 0.35)"; // faint cell lines, seen on any ink and background
  context.lineWidth = 1;
  context.beginPath();
  for (let k = 1; k < side; k++) {
    context.moveTo(k * cell + 0.5, 0); context.lineTo(k * cell + 0.5, canvas.height);
    context.moveTo(0, k * cell + 0.5); context.lineTo(canvas.width, k * cell + 0.5);
  }
  context.stroke();
  const painted = grid.reduce((sum, ink) => sum + ink, 0);
  canvas.setAttribute("aria-label", `Drawing grid, ${side} × ${side} cells, ${painted} painted`);
  state.undo.disabled = !state.history.length;
  state.clear.disabled = !painted;
  state.root.dataset.cells = encode(grid); // what the canvas shows, for tests
}

export default function (component) {
  const {parentElement, data, setTriggerValue} = component;
  if (!data) return;
  const state = parentElement.__alDrawing || (parentElement.__alDrawing = build(parentElement));
  state.setTriggerValue = setTriggerValue;
  Object.assign(state, {side: data.side, ink: data.ink, background: data.background});
  if (state.reset !== data.reset) { // first drawn, or the page replaced the drawing: that can be undone too
    if (state.grid && encode(state.grid) !== data.cells) state.history.push(encode(state.grid));
    state.grid = decode(data.cells, data.side);
    state.reset = data.reset;
  }
  render(state);
}
