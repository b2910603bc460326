// The attack lab: run the course's attacks against the raw database, a naive noisy system, a
// k-anonymous release and Dalenius, and see each success rate beside its bound — labelled by what
// the bound rests on (differential privacy, or k-anonymity / ℓ-diversity, which are not DP).
// Every run builds its own synthetic world on the server: no dataset and no budget is involved.

import { get, post } from "./api.js";
import { append, clear, errorAlert, fmt, h, pageHead, s } from "./ui.js";

const STORIES = {
  differencing: "Two sums that differ by one person reveal that person's value.",
  averaging: "The same noisy question asked many times: the noise averages away — unless repeats are cached and rewordings paid for.",
  reconstruction: "Dinur–Nissim: random subset counts reveal a whole secret column.",
  membership: "One exact count on ZIP, birth date and sex says whether John is in the data.",
  auxiliary: "“John is 10 cm taller than the average woman”: what differential privacy does not promise.",
  linking: "Sweeney's attack: join a released census file to a voter roll on (ZIP, date of birth, sex).",
  homogeneity: "Find a target's class in a k-anonymous file and read the sensitive values left in it.",
};

const SIZE_LABELS = { people: "People", trials: "Trials (attackers)", asks: "Asks per attacker", queries: "Subset queries (0: n·ln n)" };

const pct = (value) => `${(value * 100).toLocaleString("en-US", { maximumFractionDigits: 1 })}%`;

// The success rate as a bar with its interval, and the bound as a dashed mark, on 0–100%.
function rateBar(report) {
  const width = 220;
  const x = (v) => 4 + v * (width - 8);
  const svg = s("svg", { class: "rate-bar", viewBox: `0 0 ${width} 22`, width, height: 22, role: "img", "aria-label": report.success ? `success ${pct(report.success.rate)}` : "no rate" });
  svg.append(s("rect", { class: "track", x: 4, y: 7, width: width - 8, height: 8, rx: 2 }));
  if (report.success) {
    const { rate, low, high } = report.success;
    svg.append(s("rect", { class: "fill", x: 4, y: 7, width: Math.max(x(rate) - 4, 0), height: 8, rx: 2 }));
    svg.append(s("line", { class: "whisker", x1: x(low), x2: x(high), y1: 11, y2: 11 }));
    svg.append(s("line", { class: "whisker", x1: x(low), x2: x(low), y1: 7, y2: 15 }), s("line", { class: "whisker", x1: x(high), x2: x(high), y1: 7, y2: 15 }));
  }
  if (report.bound) svg.append(s("line", { class: "bound", x1: x(report.bound.value), x2: x(report.bound.value), y1: 2, y2: 20 }));
  return svg;
}

function boundCell(report) {
  if (!report.bound) return h("span", { class: "muted", text: report.target_kind === "raw" ? "none: exact answers" : "—" });
  return h(
    "div",
    {},
    h("strong", { text: pct(report.bound.value) }),
    " ",
    h("span", { class: "mono small", text: report.bound.formula }),
    h("div", { class: `small ${report.bound.guarantee === "differential privacy" ? "" : "syntactic"}`, text: report.bound.guarantee }),
  );
}

// One row per target: what it is, the measured rate, the bar, the bound and its cost. A grid, not
// a table, so that on a phone each target stacks into a block instead of a squeezed column.
function targetRow(report) {
  const rate = report.success
    ? h("div", { class: "lab-rate" }, h("strong", { text: pct(report.success.rate) }), h("span", { class: "small muted", text: ` [${pct(report.success.low)}, ${pct(report.success.high)}] of ${fmt(report.success.trials)}` }))
    : h("div", { class: "lab-rate muted", text: "—" });
  const spent = report.epsilon_spent ? `ε spent ${report.epsilon_spent.exact.replace(/\/1$/, "")}` : "exact answers";
  // Microdata attacks ask no questions: they read a released file.
  const cost = report.queries ? `${fmt(report.queries)} questions; ${spent}` : "reads the released file";
  return h(
    "div",
    { class: "lab-row", role: "row", "data-target": report.target_kind },
    h("div", { role: "cell" }, h("div", { class: "lab-target", text: report.target }), h("div", { class: "small muted", text: cost })),
    h("div", { role: "cell" }, rate, rateBar(report)),
    h("div", { role: "cell" }, boundCell(report)),
  );
}

function resultCard(answer) {
  const head = h("div", { class: "lab-row lab-head", role: "row" }, ["Target", "Success (95% interval)", "Bound and what it rests on"].map((text) => h("div", { role: "columnheader", text })));
  const rows = h("div", { class: "lab-rows", role: "table", "aria-label": "Success beside its bound" }, head, answer.reports.map(targetRow));
  const metric = answer.reports[0] ? answer.reports[0].metric : "";
  const sizes = Object.entries(answer.sizes).map(([k, v]) => `${k} ${fmt(v)}`).join(", ");
  return h(
    "section",
    { class: "card lab-result", "data-attack": answer.attack },
    h("div", { class: "card-head" }, h("h2", { text: `${answer.attack}: ${metric}` }), h("span", { class: "meta", text: sizes })),
    rows,
    h("p", { class: "small muted", text: "Bar: the measured success with its interval; dashed mark: the bound. A differential-privacy bound holds for every attacker; k-anonymity's 1/k and ℓ-diversity's “values left” hold only for this release against this kind of attacker — they are properties of a file, not DP bounds." }),
    answer.plot ? h("figure", { class: "lab-plot" }, h("img", { src: answer.plot, alt: `Plot of the ${answer.attack} attack`, id: "lab-plot" })) : null,
  );
}

export async function attacksPage(root) {
  const { attacks } = await get("/attacks");
  clear(root);
  root.append(
    pageHead(
      "Attack lab",
      "The course's attacks, measured. Each run builds its own synthetic population from the demo generator on the server — no dataset of this gateway is read and no budget is spent.",
    ),
  );
  const byName = Object.fromEntries(attacks.map((a) => [a.name, a]));
  const choice = h("select", { id: "lab-attack", name: "attack" }, attacks.map((a) => h("option", { value: a.name, text: `${a.name} (${a.kind})` })));
  const story = h("p", { class: "lede", id: "lab-story" });
  const targets = h("fieldset", { class: "lab-targets" });
  const sizes = h("div", { class: "grid two" });
  const knobs = h("div", { class: "grid two" });
  const output = h("div", { "aria-live": "polite" });
  const submit = h("button", { class: "button", type: "submit", id: "lab-run", text: "Run the attack" });
  const epsilon = h("input", { type: "text", id: "lab-epsilon", inputmode: "decimal", placeholder: "the attack's default" });
  const k = h("input", { type: "number", id: "lab-k", min: "1", max: "1000", value: "5" });
  const l = h("input", { type: "number", id: "lab-l", min: "1", max: "100", value: "3" });
  const t = h("input", { type: "number", id: "lab-t", min: "0.01", max: "1", step: "0.01", value: "0.2" });
  const field = (id, label, input) => h("div", { class: "field" }, h("label", { for: id, text: label }), input);

  const show = () => {
    const attack = byName[choice.value];
    story.textContent = STORIES[attack.name] || "";
    append(clear(targets), [
      h("legend", { text: "Targets" }),
      attack.targets.map((target) =>
        h("label", { class: "check" }, h("input", { type: "checkbox", name: "target", value: target, checked: attack.default_targets.includes(target) }), ` ${target}`),
      ),
    ]);
    append(clear(sizes), [
      Object.entries(attack.sizes).map(([name, size]) =>
        field(`lab-${name}`, `${SIZE_LABELS[name] || name} (at most ${fmt(size.cap)})`, h("input", { type: "number", id: `lab-${name}`, "data-size": name, min: "0", max: String(size.cap), value: String(size.default) })),
      ),
    ]);
    epsilon.placeholder = attack.kind === "query" ? "the attack's default" : "1";
    append(clear(knobs), [
      field("lab-epsilon", attack.kind === "query" ? "ε per question (naive and Dalenius)" : "ε of the Dalenius synthetic release", epsilon),
      attack.kind === "microdata" ? [field("lab-k", "k", k), field("lab-l", "ℓ", l), field("lab-t", "t", t)] : null,
    ]);
  };
  choice.addEventListener("change", () => {
    clear(output);
    show();
  });

  const form = h(
    "form",
    {
      class: "card",
      id: "lab-form",
      onsubmit: async (event) => {
        event.preventDefault();
        const attack = byName[choice.value];
        const body = { against: [...targets.querySelectorAll("input:checked")].map((box) => box.value) };
        for (const input of sizes.querySelectorAll("input[data-size]")) body[input.dataset.size] = Number(input.value);
        if (epsilon.value.trim()) body.epsilon = epsilon.value.trim();
        if (attack.kind === "microdata") Object.assign(body, { k: Number(k.value), l: Number(l.value), t: Number(t.value) });
        clear(output).append(h("p", { class: "muted", id: "lab-busy" }, h("span", { class: "spinner", "aria-hidden": "true" }), " Building the world and attacking it…"));
        submit.disabled = true;
        try {
          const answer = await post(`/attacks/${encodeURIComponent(attack.name)}`, body);
          clear(output).append(resultCard(answer));
        } catch (failure) {
          clear(output).append(errorAlert(failure));
        } finally {
          submit.disabled = false;
        }
      },
    },
    field("lab-attack", "Attack", choice),
    story,
    targets,
    sizes,
    knobs,
    h("div", { class: "actions" }, submit),
  );
  root.append(form, output);
  show();
}
