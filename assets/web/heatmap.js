// The app's canvas heatmap (pages/ui/heatmap.py mounts it; core/figures/canvas.py builds and packs what it shows).
// One pixel per cell, scaled up without smoothing; tick labels, axis titles and a colour bar drawn around it; a
// hover box with the exact recorded numbers; a PNG button. A new payload redraws the same canvas in place.
// A spec of kind "lines" is the head view instead: bands from queries to keys, one colour per head, a legend.

const GAP = 6;

function readPayload(bytes) {
  const data = bytes.slice(); // own, aligned copy: typed arrays need offsets that are multiples of their size
  const view = new DataView(data.buffer);
  const length = view.getUint32(0, true);
  const spec = JSON.parse(new TextDecoder().decode(data.subarray(4, 4 + length)));
  const padded = size => size + (4 - (size % 4)) % 4; // every part starts at a multiple of 4 bytes
  let offset = padded(4 + length);
  const arrays = {};
  for (const entry of spec.arrays) {
    const count = entry.sent;
    arrays[entry.name] = entry.dtype === "float32"
      ? new Float32Array(data.buffer, offset, count) : new Uint8Array(data.buffer, offset, count);
    offset += padded(count * (entry.dtype === "float32" ? 4 : 1));
  }
  for (const [name, fill] of Object.entries(spec.at_open_cells || {}))
    arrays[name] = atOpenCells(arrays[name], arrays.masked, Number(fill));
  spec.data = arrays;
  if (spec.color) [spec.rows, spec.cols] = spec.arrays.find(entry => entry.name === spec.color).shape;
  return spec;
}

function atOpenCells(sent, masked, fill) { // the open cells' values, in order, back among the masked cells' `fill`
  const full = new Float32Array(masked.length);
  for (let i = 0, k = 0; i < masked.length; i++) full[i] = masked[i] ? fill : sent[k++];
  return full;
}

function maskedAt(spec, r, c) { // a tiled overview sends one tile's mask, the same for every head
  const n = spec.tiles ? spec.tiles.size : spec.cols;
  return spec.data.masked[spec.tiles ? (r % n) * n + (c % n) : r * spec.cols + c];
}

function parseColor(text) { // [r, g, b, alpha 0 … 255]
  if (text.startsWith("#")) return [...[1, 3, 5].map(i => parseInt(text.slice(i, i + 2), 16)), 255];
  const [r, g, b, alpha = 1] = text.match(/[\d.]+/g).map(Number);
  return [r, g, b, 255 * alpha];
}

function colorTable(scale) { // 256 RGBA entries, linear between the scale's stops (an overlay's fade to transparent)
  const stops = scale.map(([at, color]) => [at, parseColor(color)]);
  const table = new Uint8ClampedArray(256 * 4);
  for (let i = 0; i < 256; i++) {
    const t = i / 255;
    let k = 1;
    while (k < stops.length - 1 && stops[k][0] < t) k++;
    const [t0, c0] = stops[k - 1], [t1, c1] = stops[k];
    const f = t1 > t0 ? Math.min(Math.max((t - t0) / (t1 - t0), 0), 1) : 0;
    for (let j = 0; j < 4; j++) table[i * 4 + j] = c0[j] + f * (c1[j] - c0[j]);
  }
  return table;
}

function cellImage(spec) { // rows x cols pixels, one per cell, written 32 bits at a time without a call per cell
  const {rows, cols, zmin, zmax} = spec;
  const values = spec.data[spec.color], masked = spec.data.masked;
  const table = new Uint32Array(colorTable(spec.colorscale).buffer); // the RGBA bytes as ImageData holds them
  const grey = new Uint32Array(new Uint8ClampedArray(parseColor(spec.masked_fill)).buffer)[0];
  const image = new ImageData(cols, rows), px = new Uint32Array(image.data.buffer), span = zmax - zmin;
  const n = spec.tiles ? spec.tiles.size : cols; // a tiled overview sends one tile's mask (maskedAt)
  for (let r = 0; r < rows; r++) {
    const maskRow = (spec.tiles ? r % n : r) * n;
    for (let c = 0, i = r * cols; c < cols; c++, i++) {
      const value = values[i];
      px[i] = masked[maskRow + (spec.tiles ? c % n : c)] || !Number.isFinite(value) ? grey
        : table[Math.round(255 * Math.min(Math.max((value - zmin) / span, 0), 1))];
    }
  }
  const canvas = document.createElement("canvas");
  canvas.width = cols;
  canvas.height = rows;
  canvas.getContext("2d").putImageData(image, 0, 0);
  return canvas;
}

function backdropImage(spec) { // an image's grey pixels [H, W], drawn under an overlay's cells
  const [height, width] = spec.arrays.find(entry => entry.name === "backdrop").shape;
  const image = new ImageData(width, height), grey = spec.data.backdrop;
  for (let i = 0; i < width * height; i++) {
    image.data.fill(grey[i], 4 * i, 4 * i + 3);
    image.data[4 * i + 3] = 255;
  }
  const canvas = document.createElement("canvas");
  canvas.width = width;
  canvas.height = height;
  canvas.getContext("2d").putImageData(image, 0, 0);
  return canvas;
}

function niceTicks(lo, hi, intervals) {
  const raw = (hi - lo) / intervals, power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map(m => m * power).find(s => s >= raw);
  const ticks = [];
  for (let v = Math.ceil(lo / step - 1e-9) * step; v <= hi + 1e-9 * step; v += step) ticks.push(Math.abs(v) < step * 1e-9 ? 0 : v);
  return ticks;
}

function formatNumber(value, digits) {
  if (value === -Infinity) return "−∞ (masked)";
  const text = value.toFixed(digits);
  return (/^-[0.]+$/.test(text) ? text.slice(1) : text).replace("-", "−"); // no "−0.0000"
}

function theme(element) {
  const style = getComputedStyle(element);
  return {text: style.getPropertyValue("--st-text-color").trim() || "#31333F",
          background: style.getPropertyValue("--st-background-color").trim() || "#ffffff",
          font: style.getPropertyValue("--st-font").trim() || "sans-serif"};
}

function tickText(spec, i, step) { // thinned labels carry their position, or every 7th token reads like a sentence
  return step > 1 ? `${i} ${spec.labels[i]}` : spec.labels[i];
}

function ticks(spec, step, axis) { // [cell position of the label's centre, text] along "rows" or "cols"
  if (spec.ticks === false) return [];
  if (spec.tiles) { // one label a tile: L0, L1 … down, H0, H1 … across
    const {size} = spec.tiles, count = axis === "rows" ? spec.tiles.layers : spec.tiles.heads;
    return Array.from({length: count}, (_, k) => [(k + 0.5) * size, `${axis === "rows" ? "L" : "H"}${k}`]);
  }
  const out = [];
  for (let i = 0; i < spec[axis]; i += step) out.push([i + 0.5, tickText(spec, i, step)]);
  return out;
}

function margins(spec, ctx, step, font, tick, scale) {
  let longest = 8;
  for (const [, text] of ticks(spec, step, "rows").concat(ticks(spec, step, "cols"))) longest = Math.max(longest, ctx.measureText(text).width);
  const rotate = !spec.tiles && spec.labels.length > 6;
  // a first row for the title (left) and the PNG button (right), then the colour bar's title, bar and ticks
  const titleRow = Math.max(26 * scale, spec.title ? 14 * scale + 12 : 0);
  const top = titleRow + (spec.colorbar_title ? font + 6 + 10 + 3 + 10 * scale + GAP + 4 : 0);
  if (spec.ticks === false) return {longest: 0, rotate: false, titleRow, top, bottom: GAP, left: GAP, right: GAP};
  const bottom = (rotate ? longest * Math.sin(Math.PI / 3) + tick : tick) + GAP * 2 + font + 8;
  return {longest, rotate, titleRow, top, bottom, left: longest + GAP + font + 14, right: 10};
}

function layout(spec, ctx, width, colors, scale, room = null) { // room: the cells' height, else what spec.height leaves
  const font = 12 * scale, tick = spec.tick_font * scale;
  ctx.font = `${tick}px ${colors.font}`;
  const fit = m => Math.max(0.05, Math.min((width - m.left - m.right) / spec.cols, (room ?? spec.height - m.top - m.bottom) / spec.rows));
  let step = spec.tick_step, m = margins(spec, ctx, step, font, tick, scale), cell = fit(m);
  const spaced = Math.ceil(1.25 * tick / cell); // labels at least 1.25 lines apart, however small the cells
  if (spaced > step) {
    step = spaced;
    m = margins(spec, ctx, step, font, tick, scale);
    cell = fit(m);
  }
  const plotWidth = cell * spec.cols, plotHeight = cell * spec.rows;
  const x0 = m.left + Math.max(0, (width - m.left - m.right - plotWidth) / 2);
  return {...m, font, tick, step, x0, y0: m.top, cell, plotWidth, plotHeight, width,
          height: Math.ceil(m.top + plotHeight + m.bottom)};
}

function drawColorbar(ctx, spec, box, colors) {
  if (!spec.colorbar_title) return; // tiles each on their own scale have none
  const barWidth = box.plotWidth * 0.7, barX = box.x0 + (box.plotWidth - barWidth) / 2;
  const titleY = box.titleRow + box.font;
  const barY = titleY + 6;
  ctx.fillStyle = colors.text;
  ctx.font = `${box.font}px ${colors.font}`;
  ctx.textAlign = "center";
  ctx.textBaseline = "alphabetic";
  ctx.fillText(spec.colorbar_title, barX + barWidth / 2, titleY, box.width - 8);
  const gradient = ctx.createLinearGradient(barX, 0, barX + barWidth, 0);
  for (const [at, color] of spec.colorscale) gradient.addColorStop(at, color);
  ctx.fillStyle = gradient;
  ctx.fillRect(barX, barY, barWidth, 10);
  ctx.fillStyle = colors.text;
  const tickFont = 10 * box.font / 12;
  ctx.font = `${tickFont}px ${colors.font}`;
  ctx.textBaseline = "top";
  const intervals = Math.max(1, Math.min(4, Math.floor(barWidth / (5 * tickFont)))); // fewer ticks on a narrow bar
  for (const value of niceTicks(spec.zmin, spec.zmax, intervals)) {
    const x = barX + barWidth * (value - spec.zmin) / (spec.zmax - spec.zmin);
    ctx.fillText(String(+value.toFixed(6)).replace("-", "−"), x, barY + 13);
  }
}

function drawTitle(ctx, spec, box, colors) {
  if (!spec.title) return;
  ctx.fillStyle = colors.text;
  ctx.textAlign = "left";
  ctx.textBaseline = "top";
  ctx.font = `${14 * box.font / 12}px ${colors.font}`;
  ctx.fillText(spec.title, 4, 4, box.width - 8);
}

function drawAxes(ctx, spec, box, colors) {
  drawTitle(ctx, spec, box, colors);
  if (spec.ticks === false) return; // an image's patches need no tick labels
  const {x0, y0, cell, plotWidth, plotHeight, tick, font} = box;
  ctx.fillStyle = colors.text;
  ctx.font = `${tick}px ${colors.font}`;
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  for (const [at, text] of ticks(spec, box.step, "rows")) ctx.fillText(text, x0 - GAP, y0 + at * cell);
  let below = y0 + plotHeight + GAP;
  for (const [at, text] of ticks(spec, box.step, "cols")) {
    const x = x0 + at * cell;
    ctx.save();
    ctx.translate(x, below);
    if (box.rotate) {
      ctx.rotate(-Math.PI / 3);
      ctx.textAlign = "right";
      ctx.textBaseline = "middle";
    } else {
      ctx.textAlign = "center";
      ctx.textBaseline = "top";
    }
    ctx.fillText(text, 0, 0);
    ctx.restore();
  }
  ctx.font = `${font}px ${colors.font}`;
  ctx.textAlign = "center";
  ctx.textBaseline = "bottom";
  const half = Math.min(ctx.measureText(spec.x_title).width, box.width - 8) / 2; // kept inside the canvas
  ctx.fillText(spec.x_title, Math.min(Math.max(x0 + plotWidth / 2, 4 + half), box.width - 4 - half), box.height - 4,
               box.width - 8);
  ctx.save();
  ctx.translate(Math.max(font, x0 - box.longest - GAP - font * 0.8), y0 + plotHeight / 2); // beside the labels
  ctx.rotate(-Math.PI / 2);
  ctx.textBaseline = "middle";
  ctx.fillText(spec.y_title, 0, 0, plotHeight + box.bottom);
  ctx.restore();
}

function drawHatching(ctx, spec, box) {
  const {x0, y0, cell} = box;
  ctx.strokeStyle = spec.hatch_color;
  ctx.lineWidth = 1;
  ctx.beginPath();
  for (let r = 0; r < spec.rows; r++) {
    for (let c = 0; c < spec.cols; c++) {
      if (!maskedAt(spec, r, c)) continue;
      ctx.moveTo(x0 + (c + 0.15) * cell, y0 + (r + 0.85) * cell);
      ctx.lineTo(x0 + (c + 0.85) * cell, y0 + (r + 0.15) * cell);
    }
  }
  ctx.stroke();
}

function drawDivider(ctx, divider, box) { // dashed lines before row and column `at` (e.g. the training length)
  const {x0, y0, cell, plotWidth, plotHeight} = box, at = divider.at * cell;
  ctx.save();
  ctx.strokeStyle = divider.color;
  ctx.lineWidth = 2;
  ctx.setLineDash([6, 4]);
  ctx.beginPath();
  ctx.moveTo(x0 + at, y0);
  ctx.lineTo(x0 + at, y0 + plotHeight);
  ctx.moveTo(x0, y0 + at);
  ctx.lineTo(x0 + plotWidth, y0 + at);
  ctx.stroke();
  ctx.restore();
}

function drawOutline(ctx, outline, box) { // one row, column (the newest query while generating) or cell framed
  const {x0, y0, cell, plotWidth, plotHeight} = box, at = outline.at * cell;
  ctx.save();
  ctx.strokeStyle = outline.color;
  ctx.lineWidth = 3;
  if (outline.axis === "cell") ctx.strokeRect(x0 + outline.at[1] * cell + 1.5, y0 + outline.at[0] * cell + 1.5, cell - 3, cell - 3);
  else if (outline.axis === "row") ctx.strokeRect(x0 + 1.5, y0 + at + 1.5, plotWidth - 3, cell - 3);
  else ctx.strokeRect(x0 + at + 1.5, y0 + 1.5, cell - 3, plotHeight - 3);
  ctx.restore();
}

function drawBackdrop(ctx, spec, box) { // the image under every tile (or under the one map)
  const {x0, y0, plotWidth, plotHeight} = box;
  const across = spec.tiles ? spec.tiles.heads : 1, down = spec.tiles ? spec.tiles.layers : 1;
  const width = plotWidth / across, height = plotHeight / down;
  for (let r = 0; r < down; r++) {
    for (let c = 0; c < across; c++) ctx.drawImage(spec.backdrop, x0 + c * width, y0 + r * height, width, height);
  }
}

function gridLines(ctx, box, step, color, width) { // lines every `step` px across the cells, inside them
  const {x0, y0, plotWidth, plotHeight} = box;
  ctx.strokeStyle = color;
  ctx.lineWidth = width;
  ctx.beginPath();
  for (let x = step; x < plotWidth - 0.5; x += step) { ctx.moveTo(x0 + x, y0); ctx.lineTo(x0 + x, y0 + plotHeight); }
  for (let y = step; y < plotHeight - 0.5; y += step) { ctx.moveTo(x0, y0 + y); ctx.lineTo(x0 + plotWidth, y0 + y); }
  ctx.stroke();
}

function drawTiles(ctx, tiles, box, colors) { // gaps in the page's colour between the heads, the chosen one outlined
  const {x0, y0, cell} = box, side = tiles.size * cell;
  ctx.save();
  gridLines(ctx, box, side, colors.background, 4);
  const [layer, head] = tiles.selected || [-1, -1];
  if (layer >= 0 && layer < tiles.layers && head >= 0 && head < tiles.heads) {
    ctx.strokeStyle = "#d62728";
    ctx.lineWidth = 3;
    ctx.strokeRect(x0 + head * side + 1.5, y0 + layer * side + 1.5, side - 3, side - 3);
  }
  ctx.restore();
}

function clearCanvas(canvas, ctx, width, height, ratio, colors) { // sized in CSS pixels, drawn at `ratio`, blank
  canvas.width = Math.round(width * ratio);
  canvas.height = Math.round(height * ratio);
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  ctx.fillStyle = colors.background;
  ctx.fillRect(0, 0, width, height);
}

function draw(canvas, spec, width, ratio, colors) { // everything, at `ratio` device pixels per CSS pixel
  if (spec.kind === "lines") return drawLines(canvas, spec, width, ratio, colors);
  const scale = spec.font_scale || 1;
  const ctx = canvas.getContext("2d");
  // larger type (presenter mode) makes the chart taller, never its cells smaller: they keep the room they have at scale 1
  const plain = scale > 1 ? layout(spec, ctx, width, colors, 1) : null;
  const box = layout(spec, ctx, width, colors, scale, plain && spec.height - plain.top - plain.bottom);
  clearCanvas(canvas, ctx, width, box.height, ratio, colors);
  ctx.imageSmoothingEnabled = false;
  if (spec.backdrop) drawBackdrop(ctx, spec, box);
  ctx.imageSmoothingEnabled = box.cell < 1; // under a pixel a cell: average, rather than drop, what cannot show
  ctx.drawImage(spec.image, box.x0, box.y0, box.plotWidth, box.plotHeight);
  if (spec.grid_color) gridLines(ctx, box, box.cell, spec.grid_color, 1); // an image's patches
  if (spec.hatch) drawHatching(ctx, spec, box);
  if (spec.divider) drawDivider(ctx, spec.divider, box);
  if (spec.tiles) drawTiles(ctx, spec.tiles, box, colors);
  if (spec.outline) drawOutline(ctx, spec.outline, box);
  drawAxes(ctx, spec, box, colors);
  drawColorbar(ctx, spec, box, colors);
  return box;
}

// ---- The head view: tokens in two columns, a band from a query to each key it reads (core.figures.canvas.head_view_spec)

const BAND_ALPHA = 0.7;

function linesLayout(spec, ctx, width, colors) {
  const scale = spec.font_scale || 1, tick = spec.tick_font * scale, font = 12 * scale;
  ctx.font = `bold ${tick}px ${colors.font}`; // bold: the marked query's label is the widest a label can be
  const widest = Math.max(0, ...spec.labels.map(text => ctx.measureText(`▶ ${text}`).width));
  const left = widest + 2 * GAP, right = widest + 2 * GAP;
  const titleRow = spec.title ? 22 * scale : 0, legendRow = 26 * scale;
  const top = titleRow + legendRow + 8 * scale, rowHeight = spec.row_px * scale, n = spec.labels.length;
  const xLeft = Math.min(left, width / 3), xRight = Math.max(width - right, 2 * width / 3);
  return {scale, tick, font, titleRow, legendRow, top, rowHeight, xLeft, xRight, width,
          height: Math.ceil(top + n * rowHeight + 10 * scale),
          xQuery: spec.query_side === "left" ? xLeft : xRight, xKey: spec.query_side === "left" ? xRight : xLeft};
}

function drawLegend(ctx, spec, box, colors) { // "head ■ H0 ■ H1 …", centred; hidden heads faded. Returns hit boxes
  const {font, titleRow, legendRow, width} = box, size = 12 * box.scale, y = titleRow + legendRow / 2;
  ctx.font = `${font}px ${colors.font}`;
  ctx.textBaseline = "middle";
  ctx.textAlign = "left";
  const items = spec.heads.map(head => ({head, width: size + 4 + ctx.measureText(head.name).width}));
  const title = ctx.measureText("head").width;
  let x = (width - (title + 12 + items.reduce((sum, item) => sum + item.width + 12, 0))) / 2;
  ctx.fillStyle = colors.text;
  ctx.fillText("head", x, y);
  x += title + 12;
  return items.map(({head, width: itemWidth}, index) => {
    ctx.globalAlpha = spec.hidden && spec.hidden.has(head.name) ? 0.3 : 1;
    ctx.fillStyle = head.color;
    ctx.fillRect(x, y - size / 2, size, size);
    ctx.fillStyle = colors.text;
    ctx.fillText(head.name, x + size + 4, y);
    ctx.globalAlpha = 1;
    const hit = {index, name: head.name, x0: x - 2, x1: x + itemWidth + 2, y0: y - size, y1: y + size};
    x += itemWidth + 12;
    return hit;
  });
}

function rowY(box, value) { return box.top + (value + 0.5) * box.rowHeight; } // row i's centre is `value` i

function drawBands(ctx, spec, box) { // one path a head, filled in its colour: overlapping bands of a head merge
  const {ends, head} = spec.data, {xQuery, xKey} = box;
  ctx.globalAlpha = BAND_ALPHA;
  spec.heads.forEach((entry, index) => {
    if (spec.hidden && spec.hidden.has(entry.name)) return;
    ctx.fillStyle = entry.color;
    ctx.beginPath();
    for (let b = 0; b < head.length; b++) {
      if (head[b] !== index) continue;
      const e = 4 * b;
      ctx.moveTo(xQuery, rowY(box, ends[e]));
      ctx.lineTo(xQuery, rowY(box, ends[e + 1]));
      ctx.lineTo(xKey, rowY(box, ends[e + 3]));
      ctx.lineTo(xKey, rowY(box, ends[e + 2]));
      ctx.closePath();
    }
    ctx.fill();
  });
  ctx.globalAlpha = 1;
}

function drawLines(canvas, spec, width, ratio, colors) {
  const ctx = canvas.getContext("2d"), box = linesLayout(spec, ctx, width, colors);
  clearCanvas(canvas, ctx, width, box.height, ratio, colors);
  drawTitle(ctx, spec, {font: box.font, width}, colors);
  box.legend = drawLegend(ctx, spec, box, colors);
  drawBands(ctx, spec, box);
  ctx.fillStyle = colors.text;
  ctx.textBaseline = "middle";
  spec.labels.forEach((label, row) => {
    const y = rowY(box, row);
    for (const side of ["left", "right"]) {
      const marked = row === spec.marked && side === spec.query_side;
      ctx.font = `${marked ? "bold " : ""}${box.tick}px ${colors.font}`;
      ctx.textAlign = side === "left" ? "right" : "left";
      ctx.fillText(marked ? `▶ ${label}` : label, side === "left" ? box.xLeft - GAP : box.xRight + GAP, y);
    }
  });
  return box;
}

function legendAt(state, x, y) {
  return (state.box.legend || []).find(item => x >= item.x0 && x <= item.x1 && y >= item.y0 && y <= item.y1);
}

function bandAt(state, x, y) { // the band drawn last (on top) under the point, of a shown head: its index, or -1
  const {spec, box} = state, {ends, head} = spec.data;
  const t = (x - box.xQuery) / (box.xKey - box.xQuery); // 0 at the query end, 1 at the key end
  if (!(t >= 0 && t <= 1)) return -1;
  const value = (y - box.top) / box.rowHeight - 0.5;
  for (let b = head.length - 1; b >= 0; b--) {
    if (spec.hidden && spec.hidden.has(spec.heads[head[b]].name)) continue;
    const e = 4 * b, upper = ends[e] + t * (ends[e + 2] - ends[e]), lower = ends[e + 1] + t * (ends[e + 3] - ends[e + 1]);
    if (value >= upper && value <= lower) return b;
  }
  return -1;
}

function queryLabelAt(state, x, y) { // the shown row whose label on the query side is under the point, or -1
  const {spec, box} = state;
  const onQuerySide = spec.query_side === "left" ? x < box.xLeft : x > box.xRight;
  const row = Math.floor((y - box.top) / box.rowHeight);
  return onQuerySide && row >= 0 && row < spec.labels.length ? row : -1;
}

function linesHover(state, x, y) {
  const {spec} = state;
  if (legendAt(state, x, y)) return "click: hide or show this head\ndouble-click: this head alone";
  const b = bandAt(state, x, y);
  if (b < 0) return null;
  const [query, key, weight] = spec.data.band.subarray(3 * b, 3 * b + 3);
  const label = index => spec.labels[spec.tokens.indexOf(index)];
  return [spec.heads[spec.data.head[b]].name, `query ${label(query)} → key ${label(key)}`,
          `weight ${formatNumber(weight, 4)}`, "click: this query's bands alone"].join("\n");
}

function linesClick(state, x, y, double) {
  const item = legendAt(state, x, y), {spec} = state;
  if (item) { // as plotly's legend: a click hides or shows a head, a double-click shows it alone (or all again)
    const names = spec.heads.map(head => head.name), hidden = state.hidden;
    if (!double) hidden.has(item.name) ? hidden.delete(item.name) : hidden.add(item.name);
    else if (names.every(name => name === item.name || hidden.has(name))) hidden.clear();
    else names.forEach(name => name === item.name ? hidden.delete(name) : hidden.add(name));
    render(state);
    return;
  }
  if (double) return;
  const b = bandAt(state, x, y), row = queryLabelAt(state, x, y);
  const query = b >= 0 ? spec.data.band[3 * b] : row >= 0 ? spec.tokens[row] : null;
  if (query !== null) state.setTriggerValue("cell", {query});
}

function cellAt(state, event) {
  const {box, spec} = state, bounds = state.canvas.getBoundingClientRect();
  const c = Math.floor((event.clientX - bounds.left - box.x0) / box.cell);
  const r = Math.floor((event.clientY - bounds.top - box.y0) / box.cell);
  return r >= 0 && r < spec.rows && c >= 0 && c < spec.cols ? [r, c] : null;
}

function tileOf(spec, r, c) { // {layer, head, row, col}: which head's tile a cell is in, and where in it
  const n = spec.tiles.size;
  return {layer: Math.floor(r / n), head: Math.floor(c / n), row: r % n, col: c % n};
}

function hoverText(spec, r, c) {
  const i = r * spec.cols + c;
  const tile = spec.tiles ? tileOf(spec, r, c) : null;
  const [row, col] = tile ? [tile.row, tile.col] : [r, c];
  const lines = spec.patches // an image's patch: its token n, row and column
    ? [`token n = ${spec.patches.first + row * spec.patches.cols + col}`, `patch row ${row}, column ${col}`]
    : tile // a tile's rows and columns are named by spans: "3: cat", or "16–31" for a block
      ? [`${spec.row_role} ${spec.labels[row]}`, `${spec.col_role} ${spec.labels[col]}`]
      : [`${spec.row_role} ${r}: ${spec.labels[r]}`, `${spec.col_role} ${c}: ${spec.labels[c]}`];
  if (tile) lines.unshift(`layer ${tile.layer} · head ${tile.head}`);
  for (const field of spec.fields) {
    lines.push(`${field.name} ${formatNumber(spec.data[field.array][i], field.digits)}${field.unit || ""}`);
  }
  if (maskedAt(spec, r, c)) lines.push("masked: the query may not see this key");
  return lines.join("\n");
}

function canvasPoint(state, event) { // [x, y] in CSS pixels from the canvas' top left
  const bounds = state.canvas.getBoundingClientRect();
  return [event.clientX - bounds.left, event.clientY - bounds.top];
}

function showHover(state, event) {
  const tip = state.tip, lines = state.spec.kind === "lines";
  const cell = lines ? null : cellAt(state, event);
  const text = lines ? linesHover(state, ...canvasPoint(state, event)) : cell && hoverText(state.spec, ...cell);
  if (!text) { tip.hidden = true; return; }
  tip.textContent = text;
  tip.hidden = false;
  const bounds = state.root.getBoundingClientRect();
  let x = event.clientX - bounds.left + 14, y = event.clientY - bounds.top + 14;
  if (x + tip.offsetWidth > bounds.width) x = Math.max(0, x - tip.offsetWidth - 28);
  if (event.clientY + 14 + tip.offsetHeight > window.innerHeight) y = Math.max(0, y - tip.offsetHeight - 28); // above
  tip.style.left = `${x}px`;
  tip.style.top = `${y}px`;
}

function savePng(state) {
  const canvas = document.createElement("canvas");
  const spec = {...state.spec, title: state.spec.png_title || state.spec.title}; // the file says what it shows
  draw(canvas, spec, state.width, 2, theme(state.root));
  canvas.toBlob(blob => {
    const link = document.createElement("a");
    link.href = URL.createObjectURL(blob);
    link.download = `${state.spec.filename || "heatmap"}.png`;
    link.click();
    setTimeout(() => URL.revokeObjectURL(link.href), 1000);
  }, "image/png");
}

const STYLE = `.al-heatmap { position: relative; width: 100%; }
.al-heatmap canvas { display: block; cursor: crosshair; }
.al-heatmap-png { position: absolute; top: 0; right: 0; z-index: 1; font: calc(12px * var(--al-scale, 1)) sans-serif;
  padding: 2px 8px;
  color: var(--st-text-color, #31333F); background: var(--st-background-color, #fff); opacity: 0.75;
  border: 1px solid rgba(128, 128, 128, 0.4); border-radius: 4px; cursor: pointer; }
.al-heatmap-png:hover { opacity: 1; }
.al-heatmap-tip { position: absolute; z-index: 2; pointer-events: none; white-space: pre; font: calc(12px * var(--al-scale, 1))/1.45
  var(--st-font, sans-serif); padding: 6px 9px; border-radius: 4px; color: #fff; background: rgba(38, 39, 48, 0.92);
  box-shadow: 0 2px 6px rgba(0, 0, 0, 0.25); }`;

function addStyle() { // once per page: the style sheet travels in this file, not in every chart's message
  if (document.getElementById("al-heatmap-style")) return;
  const style = document.createElement("style");
  style.id = "al-heatmap-style";
  style.textContent = STYLE;
  document.head.appendChild(style);
}

function build(parent) {
  addStyle();
  const root = document.createElement("div");
  root.className = "al-heatmap";
  root.dataset.drawn = "0";
  const button = document.createElement("button");
  button.className = "al-heatmap-png";
  button.type = "button";
  button.textContent = "⤓ PNG";
  button.title = "Download plot as a PNG";
  const canvas = document.createElement("canvas");
  canvas.setAttribute("role", "img");
  const tip = document.createElement("div");
  tip.className = "al-heatmap-tip";
  tip.hidden = true;
  root.append(button, canvas, tip);
  parent.appendChild(root);
  const state = {root, canvas, tip, width: 0, hidden: new Set()}; // hidden: the head view's heads hidden by its legend
  button.addEventListener("click", () => savePng(state));
  canvas.addEventListener("mousemove", event => showHover(state, event));
  canvas.addEventListener("mouseleave", () => { tip.hidden = true; });
  canvas.addEventListener("dblclick", event => {
    if (state.spec.kind === "lines") linesClick(state, ...canvasPoint(state, event), true);
  });
  canvas.addEventListener("click", event => {
    if (state.spec.kind === "lines") { linesClick(state, ...canvasPoint(state, event), false); return; }
    const cell = cellAt(state, event), spec = state.spec;
    if (!cell) return;
    if (spec.tiles) { // the head whose tile was clicked, and the cell within it
      const tile = tileOf(spec, ...cell);
      state.setTriggerValue("cell", {layer: tile.layer, head: tile.head, [spec.row_role]: tile.row, [spec.col_role]: tile.col});
    } else {
      state.setTriggerValue("cell", {[spec.row_role]: cell[0], [spec.col_role]: cell[1]});
    }
  });
  state.observer = new ResizeObserver(() => {
    if (state.spec && root.clientWidth && Math.abs(root.clientWidth - state.width) > 1) render(state);
  });
  state.observer.observe(root);
  return state;
}

function render(state) {
  state.width = state.root.clientWidth || 600;
  state.spec.hidden = state.hidden;
  state.box = draw(state.canvas, state.spec, state.width, window.devicePixelRatio || 1, theme(state.root));
  const {spec, box} = state;
  state.canvas.setAttribute("aria-label", spec.kind === "lines"
    ? `${spec.title}: head view of ${spec.labels.length} tokens, heads ${spec.heads.map(h => h.name).join(", ")}`
    : `${spec.title || spec.colorbar_title}, ${spec.rows} × ${spec.cols} heatmap; rows: ${spec.y_title}; ` +
      `columns: ${spec.x_title}`);
  state.root.style.setProperty("--al-scale", String(spec.font_scale || 1)); // the button and hover box, too
  state.root.dataset.plot = JSON.stringify(spec.kind === "lines" // where the cells (or the bands' ends) are, for tests
    ? [box.xQuery, box.xKey, box.top, box.rowHeight] : [box.x0, box.y0, box.cell]);
  state.root.dataset.title = spec.title || ""; // what it shows, as plotly's title text is, for tests
  state.root.dataset.drawn = String(Number(state.root.dataset.drawn) + 1); // tells tests and benchmarks it drew
}

export default function (component) {
  const {parentElement, data, setTriggerValue} = component;
  if (!data) return;
  const state = parentElement.__alHeatmap || (parentElement.__alHeatmap = build(parentElement));
  state.setTriggerValue = setTriggerValue;
  const spec = readPayload(data);
  if (spec.kind !== "lines") spec.image = cellImage(spec);
  if (spec.data.backdrop) spec.backdrop = backdropImage(spec);
  state.spec = spec;
  state.tip.hidden = true;
  render(state);
}
