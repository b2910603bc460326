// Charts drawn as SVG by hand (no library, no network): bars with error bars, budget gauges and
// the history of spending. Every chart carries a text title for screen readers; the same numbers
// are always in a table next to it.

import { fmt, fmtEps, h, s } from "./ui.js";

function niceStep(span, target) {
  const raw = span / Math.max(target, 1);
  const power = Math.pow(10, Math.floor(Math.log10(raw || 1)));
  const unit = raw / power;
  const nice = unit < 1.5 ? 1 : unit < 3 ? 2 : unit < 7 ? 5 : 10;
  return nice * power;
}

function ticks(low, high, target = 5) {
  if (low === high) {
    high = low + 1;
  }
  const step = niceStep(high - low, target);
  const first = Math.ceil(low / step) * step;
  const out = [];
  for (let value = first; value <= high + step * 1e-9; value += step) out.push(Math.abs(value) < step * 1e-9 ? 0 : value);
  return out;
}

// Charts are drawn in the page's own pixels where they can be: an SVG scales with its box, so
// one drawn 760 wide and shown 330 wide on a phone shrinks its 11 px labels to about 5 px. The
// width is what the main column offers (less a card's padding), at most the chart's usual width.
export const MIN_WIDTH = 300;

export function chartWidth(usual) {
  const main = document.getElementById("main");
  const room = main ? main.clientWidth - 72 : usual;
  return Math.round(Math.max(MIN_WIDTH, Math.min(usual, room)));
}

function shorten(text, max) {
  const value = String(text);
  return value.length > max ? `${value.slice(0, max - 1)}…` : value;
}

// A horizontal bar per group with its interval as a whisker: groups read top to bottom in the
// order the answer lists them, and long key names fit on the left.
export function barChart({ labels, values, lows, highs, title, confidence }) {
  const n = labels.length;
  const row = n > 24 ? 18 : 26;
  const width = chartWidth(760);
  const narrow = width < 560;
  const longest = narrow ? 14 : 24;
  const labelWidth = Math.min(narrow ? 104 : 170, Math.max(60, 7 * Math.max(...labels.map((label) => Math.min(String(label).length, longest)), 4)));
  const top = 28;
  const bottom = 30;
  const right = narrow ? 52 : 64;
  const height = top + bottom + n * row;
  const numbers = [...values, ...lows, ...highs].filter((value) => typeof value === "number" && Number.isFinite(value));
  let low = Math.min(0, ...numbers);
  let high = Math.max(0, ...numbers);
  if (low === high) high = low + 1;
  const marks = ticks(low, high, narrow ? 3 : 6);
  low = Math.min(low, marks[0]);
  high = Math.max(high, marks[marks.length - 1]);
  const x0 = labelWidth + 12;
  const x1 = width - right;
  const x = (value) => x0 + ((value - low) / (high - low)) * (x1 - x0);
  const pct = confidence ? `${Math.round(confidence * 1000) / 10}%` : "95%";

  const svg = s("svg", {
    class: "chart",
    viewBox: `0 0 ${width} ${height}`,
    role: "img",
    "aria-label": `${title}: bar chart with ${pct} error bars, ${n} groups`,
    "data-groups": n,
  });
  svg.append(s("title", { text: `${title} (${pct} error bars)` }));
  const grid = s("g", { class: "grid" });
  const axis = s("g", { class: "axis" });
  for (const mark of marks) {
    const px = x(mark);
    grid.append(s("line", { x1: px, x2: px, y1: top - 6, y2: height - bottom + 4 }));
    axis.append(s("text", { x: px, y: height - bottom + 18, "text-anchor": "middle", text: fmt(mark, 3) }));
  }
  svg.append(grid, axis);
  svg.append(s("text", { x: x0, y: 14, class: "value-label", text: title }));
  svg.append(s("line", { class: "zero", x1: x(0), x2: x(0), y1: top - 6, y2: height - bottom + 4 }));

  labels.forEach((label, i) => {
    const value = values[i];
    const y = top + i * row;
    const mid = y + row / 2;
    const group = s("g", { class: "group" });
    group.append(s("text", { x: x0 - 8, y: mid + 4, "text-anchor": "end", text: shorten(label, longest) }));
    if (typeof value === "number" && Number.isFinite(value)) {
      const a = x(Math.min(0, value));
      const b = x(Math.max(0, value));
      const bar = s("rect", { class: "bar", x: a, y: y + row * 0.18, width: Math.max(b - a, 1), height: row * 0.64, rx: 2 });
      bar.append(s("title", { text: `${label}: ${fmt(value)} [${fmt(lows[i])}, ${fmt(highs[i])}]` }));
      group.append(bar);
      const lo = lows[i];
      const hi = highs[i];
      if (typeof lo === "number" && typeof hi === "number") {
        const cap = row * 0.22;
        group.append(
          s("line", { class: "whisker", x1: x(lo), x2: x(hi), y1: mid, y2: mid }),
          s("line", { class: "whisker", x1: x(lo), x2: x(lo), y1: mid - cap, y2: mid + cap }),
          s("line", { class: "whisker", x1: x(hi), x2: x(hi), y1: mid - cap, y2: mid + cap }),
        );
      }
      group.append(s("text", { class: "value-label", x: Math.max(x(hi ?? value), b) + 6, y: mid + 4, text: fmt(value, 3) }));
    }
    svg.append(group);
  });
  const legend = h(
    "div",
    { class: "chart-legend" },
    h("span", {}, h("span", { class: "swatch" }), "noisy value"),
    h("span", {}, h("span", { class: "whisker-key" }), `${pct} interval for the noise (not for clipping bias)`),
  );
  return h("figure", { class: "chart-figure", style: "margin:0" }, svg, legend);
}

// A ring showing how much of a budget remains; the number in the middle is what remains.
export function ring({ spent, budget, size = 120 }) {
  const radius = 46;
  const circumference = 2 * Math.PI * radius;
  const used = budget > 0 ? Math.min(Math.max(spent / budget, 0), 1) : 1;
  const remaining = Math.max(budget - spent, 0);
  const svg = s("svg", { width: size, height: size, viewBox: "0 0 120 120", role: "img", "aria-label": `budget: ${fmtEps(remaining)} of ${fmtEps(budget)} remaining` });
  svg.append(
    s("circle", { class: "ring-bg", cx: 60, cy: 60, r: radius, fill: "none", "stroke-width": 12 }),
    s("circle", {
      class: `ring-fg${used > 0.8 ? " high" : ""}`,
      cx: 60,
      cy: 60,
      r: radius,
      fill: "none",
      "stroke-width": 12,
      "stroke-linecap": budget > 0 && used > 0 ? "round" : "butt",
      "stroke-dasharray": circumference,
      "stroke-dashoffset": circumference * used,
      transform: "rotate(-90 60 60)",
    }),
    s("text", { class: "ring-text", x: 60, y: 62, "text-anchor": "middle", text: fmtEps(remaining) }),
    s("text", { class: "ring-sub", x: 60, y: 78, "text-anchor": "middle", text: "remaining" }),
  );
  return svg;
}

// A bar gauge: spent (filled) out of the budget, with the numbers under it.
export function gauge({ spent, budget, measure = "ε" }) {
  const used = budget > 0 ? Math.min(Math.max(spent / budget, 0), 1) : 1;
  const remaining = Math.max(budget - spent, 0);
  return h(
    "div",
    { class: "gauge", role: "meter", "aria-valuemin": 0, "aria-valuemax": budget, "aria-valuenow": spent, "aria-label": `${measure} spent` },
    h("div", { class: "track" }, h("div", { class: `spent${used > 0.8 ? " high" : ""}`, style: `width:${(used * 100).toFixed(1)}%` })),
    h(
      "div",
      { class: "legend" },
      h("span", {}, "spent ", h("strong", { text: `${measure} ${fmtEps(spent)}` })),
      h("span", {}, "remaining ", h("strong", { class: "remaining-value", text: `${measure} ${fmtEps(remaining)}` }), ` of ${fmtEps(budget)}`),
    ),
  );
}

// Cumulative loss charged over time (one step per charge) against the budget line.
export function spendChart(points, budget, measure = "ε") {
  const width = chartWidth(900);
  const height = 220;
  const left = 48;
  const right = 16;
  const top = 16;
  const bottom = 28;
  const times = points.map((point) => point.time);
  // A margin on each side keeps a single charge, or charges made within a second, readable.
  const span = Math.max(Math.max(...times) - Math.min(...times), 60_000);
  const t0 = Math.min(...times) - span * 0.05;
  const t1 = Math.max(...times) + span * 0.05;
  const total = points.length ? points[points.length - 1].total : 0;
  const high = Math.max(budget || 0, total) * 1.08 || 1;
  const x = (t) => left + ((t - t0) / (t1 - t0)) * (width - left - right);
  const y = (v) => height - bottom - (v / high) * (height - top - bottom);
  const svg = s("svg", { class: "chart spend", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": `cumulative ${measure} spent over time` });
  svg.append(s("title", { text: `Cumulative ${measure} spent` }));
  const grid = s("g", { class: "grid" });
  const axis = s("g", { class: "axis" });
  for (const mark of ticks(0, high, 4)) {
    if (mark > high) continue;
    grid.append(s("line", { x1: left, x2: width - right, y1: y(mark), y2: y(mark) }));
    axis.append(s("text", { x: left - 6, y: y(mark) + 4, "text-anchor": "end", text: fmtEps(mark) }));
  }
  svg.append(grid, axis);
  if (budget) {
    svg.append(
      s("line", { x1: left, x2: width - right, y1: y(budget), y2: y(budget), stroke: "#b42323", "stroke-dasharray": "5 4", "stroke-width": 1.5 }),
      s("text", { x: width - right, y: y(budget) - 5, "text-anchor": "end", fill: "#b42323", text: `budget ${measure} ${fmtEps(budget)}` }),
    );
  }
  let path = `M ${x(t0)} ${y(0)}`;
  for (const point of points) path += ` H ${x(point.time)} V ${y(point.total)}`;
  path += ` H ${width - right}`;
  svg.append(s("path", { d: path, fill: "none", stroke: "#2f4fc9", "stroke-width": 2.2 }));
  for (const point of points) svg.append(s("circle", { cx: x(point.time), cy: y(point.total), r: 3, fill: "#2f4fc9" }));
  // On a narrow chart the two ends' dates and times would overlap: the times only.
  const when = (t) => (width < 560 ? new Date(t).toLocaleTimeString() : new Date(t).toLocaleString());
  svg.append(s("text", { x: left, y: height - 8, text: when(t0) }));
  svg.append(s("text", { x: width - right, y: height - 8, "text-anchor": "end", text: when(t1) }));
  return svg;
}

// A curve with two shaded bands (simultaneous, then pointwise) under the released line: the
// density releases. x and y axes with a few ticks; the numbers are also offered as a table.
export function lineChart({ x, y, low, high, bandLow, bandHigh, xLabel, title, confidence }) {
  const width = chartWidth(760);
  const height = 320;
  const left = 64;
  const right = 20;
  const top = 24;
  const bottom = 40;
  const ys = [...y, ...high, ...bandHigh, 0].filter((v) => Number.isFinite(v));
  const yMax = Math.max(...ys) || 1;
  const xMin = x[0];
  const xMax = x[x.length - 1] === xMin ? xMin + 1 : x[x.length - 1];
  const px = (value) => left + ((value - xMin) / (xMax - xMin)) * (width - left - right);
  const py = (value) => top + (1 - Math.max(value, 0) / yMax) * (height - top - bottom);
  const pct = confidence ? `${Math.round(confidence * 1000) / 10}%` : "95%";
  const svg = s("svg", {
    class: "chart line-chart",
    viewBox: `0 0 ${width} ${height}`,
    role: "img",
    "aria-label": `${title}: curve with ${pct} pointwise and simultaneous bands over ${x.length} points`,
    "data-points": x.length,
  });
  svg.append(s("title", {}, title));
  const area = (lo, hi) =>
    `M${x.map((v, i) => `${px(v)},${py(hi[i])}`).join("L")}L${x.map((v, i) => `${px(v)},${py(lo[i])}`).reverse().join("L")}Z`;
  svg.append(s("path", { d: area(bandLow, bandHigh), class: "band-wide" }));
  svg.append(s("path", { d: area(low, high), class: "band" }));
  svg.append(s("path", { d: `M${x.map((v, i) => `${px(v)},${py(y[i])}`).join("L")}`, class: "curve" }));
  for (const mark of ticks(0, yMax, 4)) {
    if (mark > yMax * 1.0001) continue;
    svg.append(s("line", { x1: left, x2: width - right, y1: py(mark), y2: py(mark), class: "grid" }));
    svg.append(s("text", { x: left - 6, y: py(mark) + 4, class: "tick", "text-anchor": "end" }, fmt(mark, 3)));
  }
  for (const mark of ticks(xMin, xMax, width < 560 ? 4 : 6)) {
    if (mark < xMin || mark > xMax) continue;
    svg.append(s("text", { x: px(mark), y: height - bottom + 16, class: "tick", "text-anchor": "middle" }, fmt(mark, 4)));
  }
  svg.append(s("text", { x: (left + width - right) / 2, y: height - 6, class: "axis-label", "text-anchor": "middle" }, xLabel));
  return svg;
}

// A tick's number in at most about five characters: 400k, 1.25M (the table has the exact ones).
function compact(value) {
  const abs = Math.abs(value);
  if (abs >= 1e9) return `${fmt(value / 1e9, 3)}G`;
  if (abs >= 1e6) return `${fmt(value / 1e6, 3)}M`;
  if (abs >= 1e4) return `${fmt(value / 1e3, 3)}k`;
  return fmt(value, 3);
}

// A series over time: one point per period joined by a line, the interval of each point shaded
// as a band, y from the lowest interval end (or 0) to the highest. Periods are evenly spaced
// (a month is one step, like a day); their labels are thinned to what the width holds. Every
// point carries its numbers as a tooltip; the same numbers are in the table under the chart.
export function seriesChart({ labels, values, lows, highs, xLabel, yLabel, title, confidence }) {
  const n = labels.length;
  const width = chartWidth(760);
  const narrow = width < 560;
  const height = narrow ? 260 : 300;
  const left = narrow ? 54 : 66;
  const right = narrow ? 12 : 20;
  const top = 16;
  const bottom = 48;
  const finite = [...values, ...lows, ...highs].filter((v) => typeof v === "number" && Number.isFinite(v));
  let yMin = Math.min(0, ...finite);
  let yMax = Math.max(0, ...finite);
  if (yMin === yMax) yMax = yMin + 1;
  const marks = ticks(yMin, yMax, narrow ? 4 : 5);
  // The axis ends on ticks: a band above the last labelled line would read as off the scale.
  const step = marks.length > 1 ? marks[1] - marks[0] : 1;
  while (marks[0] > yMin) marks.unshift(marks[0] - step);
  while (marks[marks.length - 1] < yMax) marks.push(marks[marks.length - 1] + step);
  yMin = marks[0];
  yMax = marks[marks.length - 1];
  const inner = Math.min(16, (width - left - right) / Math.max(n, 2) / 2);
  const x0 = left + inner;
  const x1 = width - right - inner;
  const px = (i) => (n === 1 ? (x0 + x1) / 2 : x0 + (i / (n - 1)) * (x1 - x0));
  const clamp = (v) => (Number.isFinite(v) ? Math.min(Math.max(v, yMin), yMax) : v > 0 ? yMax : yMin);
  const py = (v) => top + (1 - (clamp(v) - yMin) / (yMax - yMin)) * (height - top - bottom);
  const pct = confidence ? `${Math.round(confidence * 1000) / 10}%` : "95%";
  const svg = s("svg", {
    class: "chart series-chart",
    viewBox: `0 0 ${width} ${height}`,
    role: "img",
    "aria-label": `${title}: line over ${n} periods with a ${pct} interval band per point`,
    "data-points": n,
  });
  svg.append(s("title", { text: `${title} (${pct} intervals)` }));
  const grid = s("g", { class: "grid" });
  const axis = s("g", { class: "axis" });
  for (const mark of marks) {
    grid.append(s("line", { x1: left, x2: width - right, y1: py(mark), y2: py(mark) }));
    axis.append(s("text", { x: left - 6, y: py(mark) + 4, "text-anchor": "end", text: compact(mark) }));
  }
  const room = Math.max(1, Math.floor((x1 - x0) / (narrow ? 78 : 92)) + 1);
  const every = Math.max(1, Math.ceil(n / room));
  for (let i = 0; i < n; i += every) {
    axis.append(s("line", { x1: px(i), x2: px(i), y1: height - bottom, y2: height - bottom + 4 }));
    // A label that would pass the chart's edge is anchored at its end (or start) instead.
    const half = String(labels[i]).length * 3.4;
    const anchor = px(i) + half > width ? "end" : px(i) - half < 0 ? "start" : "middle";
    axis.append(s("text", { x: anchor === "end" ? width - 2 : anchor === "start" ? 2 : px(i), y: height - bottom + 17, "text-anchor": anchor, text: labels[i] }));
  }
  axis.append(s("line", { x1: left, x2: width - right, y1: height - bottom, y2: height - bottom }));
  svg.append(grid, axis);
  if (yMin < 0) svg.append(s("line", { class: "zero", x1: left, x2: width - right, y1: py(0), y2: py(0) }));
  // A period without an estimate (no reports in it) is a gap: the line and band stop there.
  const points = [...Array(n).keys()].filter((i) => Number.isFinite(values[i]));
  const runs = [];
  for (const i of points) {
    if (runs.length && runs[runs.length - 1].at(-1) === i - 1) runs[runs.length - 1].push(i);
    else runs.push([i]);
  }
  for (const run of runs) {
    if (run.length > 1) {
      const upper = run.map((i) => `${px(i)},${py(highs[i])}`);
      const lower = run.map((i) => `${px(i)},${py(lows[i])}`).reverse();
      svg.append(s("path", { class: "band", d: `M${upper.join("L")}L${lower.join("L")}Z` }));
      svg.append(s("path", { class: "curve", d: `M${run.map((i) => `${px(i)},${py(values[i])}`).join("L")}` }));
    } else {
      const [i] = run;
      svg.append(s("rect", { class: "band", x: px(i) - 6, width: 12, y: py(highs[i]), height: Math.max(py(lows[i]) - py(highs[i]), 1) }));
    }
  }
  const dots = s("g", { class: "dots" });
  for (const i of points) {
    const dot = s("circle", { class: "dot", cx: px(i), cy: py(values[i]), r: n > 90 ? 1.5 : 3 });
    dot.append(s("title", { text: `${labels[i]}: ${fmt(values[i])} [${fmt(lows[i])}, ${fmt(highs[i])}]` }));
    dots.append(dot);
  }
  svg.append(dots);
  svg.append(s("text", { class: "axis-label", x: (left + width - right) / 2, y: height - 8, "text-anchor": "middle", text: xLabel }));
  const middle = (top + height - bottom) / 2;
  svg.append(s("text", { class: "axis-label", x: 14, y: middle, "text-anchor": "middle", transform: `rotate(-90 14 ${middle})`, text: shorten(yLabel, Math.floor((height - top - bottom) / 7)) }));
  const legend = h(
    "div",
    { class: "chart-legend" },
    h("span", {}, h("span", { class: "line-key" }), "estimate"),
    h("span", {}, h("span", { class: "band-key" }), `${pct} interval of each point`),
  );
  return h("figure", { class: "chart-figure", style: "margin:0" }, svg, legend);
}
