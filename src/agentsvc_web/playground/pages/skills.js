// Skills: instructions in the Agent Skills format (a SKILL.md) that an agent
// loads when a task calls for one. The page lists the organization's skills
// (version, status, where each comes from), attaches them to the agent picked in
// the side bar, switches them off and on, syncs one that comes from a URL or a
// repository, and adds one: written here, from a URL or git repository, or from
// the registry the service ships (searched in place).

import { h } from "../dom.js";
import { badge, check, dangerButton, enc, labelled, onSubmit, options, section, status, submitRow, when } from "./formkit.js";

let carried = ""; // a note for the next drawing of the page (a sync's outcome)
const EXAMPLE = "---\nname: tea\ndescription: How this house brews tea. Use for any tea order.\n---\n# Tea\nSteep green tea for 2 minutes at 80C.";

function skillTable(ctx, skills, agent, bound, note) {
  if (!skills.length) return h("p", { class: "muted" }, "No skill yet.");
  const attach = async (skillId, on) => {
    const ids = new Set(bound.map((b) => b.skill_id));
    if (on) ids.add(skillId);
    else ids.delete(skillId);
    await ctx.api.post(`/api/agents/${enc(agent.id)}/skills`, { skillIds: [...ids] });
    await ctx.refresh();
  };
  const from = (s) => {
    if (s.source?.type === "inline") return "written here";
    if (s.source?.type === "registry") return "from the registry";
    return `from ${s.source?.type}: ${s.source?.url ?? ""}`;
  };
  const buttons = (s) =>
    h(
      "div",
      { class: "row" },
      agent ? attachBox(s) : null,
      h(
        "button",
        {
          type: "button",
          "aria-label": `${s.status === "disabled" ? "Enable" : "Disable"} ${s.name}`,
          onclick: ctx.guarded(async () => {
            await ctx.api.patch(`/api/skills/${enc(s.id)}`, { enabled: s.status === "disabled" });
            await ctx.refresh();
          }),
        },
        s.status === "disabled" ? "Enable" : "Disable",
      ),
      s.source?.type !== "inline"
        ? h(
            "button",
            {
              type: "button",
              "aria-label": `Sync ${s.name}`,
              onclick: ctx.guarded(async () => {
                const r = await ctx.api.post(`/api/skills/${enc(s.id)}/sync`);
                note.carry(r.changed ? `${s.name} synced: v${r.from_version} -> v${r.to_version}` : `${s.name} synced: no change`);
                await ctx.refresh();
              }),
            },
            "Sync",
          )
        : null,
      dangerButton("Delete", ctx.guarded(async () => {
        await ctx.api.delete(`/api/skills/${enc(s.id)}`);
        await ctx.refresh();
      }), { "aria-label": `Delete ${s.name}` }),
    );
  const attachBox = (s) => {
    const c = check(`on ${agent.name}`, { checked: bound.some((b) => b.skill_id === s.id) ? true : null, "aria-label": `${s.name} attached to ${agent.name}` });
    c.input.addEventListener("change", ctx.guarded(() => attach(s.id, c.input.checked)));
    return c.wrap;
  };
  return h(
    "ul",
    { class: "plain cards", id: "skill-table", "aria-label": "Skills" },
    skills.map((s) =>
      h(
        "li",
        { class: "card", "data-id": s.id },
        h(
          "div",
          { class: "row wrap" },
          h("strong", {}, s.name),
          h("span", { class: "muted small" }, `v${s.version} · ${from(s)}`),
          badge(s.status),
          s.sync_error ? h("span", { class: "step-error small" }, s.sync_error) : null,
        ),
        h("p", { class: "small" }, s.description),
        buttons(s),
        h(
          "details",
          {},
          h("summary", {}, `Instructions (updated ${when(s.updated_at)})`),
          h("pre", {}, s.body),
          s.files.length ? h("p", { class: "small muted" }, `Files: ${s.files.map((f) => `${f.path} (${f.size} B)`).join(", ")}`) : null,
        ),
      ),
    ),
  );
}

function writeForm(ctx) {
  const content = labelled("SKILL.md", "textarea", { rows: 7, required: true, spellcheck: "false", class: "code", id: "skill-content" });
  content.input.value = EXAMPLE;
  const said = status();
  const form = h("form", { class: "stack", id: "skill-write" }, content.wrap, submitRow("Add skill", said));
  onSubmit(form, ctx, async () => {
    const made = await ctx.api.post("/api/skills", { content: content.input.value });
    said.say(`added ${made.name}`);
    await ctx.refresh();
  });
  return form;
}

function sourceForm(ctx) {
  const type = labelled("From", "select", {}, options([["git", "a git repository"], ["url", "a URL (a SKILL.md)"]], "git"));
  const url = labelled("URL", "input", { type: "url", required: true, placeholder: "https://github.com/you/skills.git" });
  const path = labelled("Path in the repository", "input", { placeholder: "skills/tea" });
  const ref = labelled("Branch or tag", "input", {});
  const said = status();
  const form = h("form", { class: "grid-form" }, type.wrap, url.wrap, path.wrap, ref.wrap, submitRow("Fetch skill", said));
  onSubmit(form, ctx, async () => {
    const source = { type: type.input.value, url: url.input.value };
    if (path.input.value) source.path = path.input.value;
    if (ref.input.value) source.ref = ref.input.value;
    const made = await ctx.api.post("/api/skills", { source });
    said.say(`added ${made.name}`);
    await ctx.refresh();
  });
  return form;
}

function registry(ctx) {
  const q = labelled("Search the registry", "input", { type: "search", placeholder: "pdf, review, tea…", id: "skill-browse-q" });
  const results = h("div", { "aria-live": "polite", id: "skill-browse" });
  const search = async () => {
    const found = await ctx.api.get(`/api/skills/browse?${new URLSearchParams({ q: q.input.value })}`);
    results.replaceChildren(
      found.length
        ? h(
            "ul",
            { class: "plain" },
            found.map((r) =>
              h(
                "li",
                { class: "row" },
                h("span", {}, h("strong", {}, r.name), ` (${r.category}, v${r.version}): ${r.description}`),
                h(
                  "button",
                  {
                    type: "button",
                    "aria-label": `Add ${r.name}`,
                    onclick: ctx.guarded(async () => {
                      await ctx.api.post("/api/skills", { registryId: r.id });
                      await ctx.refresh();
                    }),
                  },
                  "Add",
                ),
              ),
            ),
          )
        : h("p", { class: "muted" }, "No skill of the registry matches."),
    );
  };
  const form = h("form", { class: "row", role: "search", id: "skill-browse-form", "aria-label": "The registry of skills" }, q.wrap, h("button", { type: "submit" }, "Search"));
  q.wrap.classList.add("grow");
  form.addEventListener("submit", ctx.guarded(search));
  return [form, results];
}

export default {
  id: "skills",
  title: "Skills",
  async render(root, ctx) {
    const agent = ctx.agent();
    const [skills, bound] = await Promise.all([
      ctx.api.get("/api/skills"),
      agent ? ctx.api.get(`/api/agents/${enc(agent.id)}/skills`) : Promise.resolve([]),
    ]);
    const note = status();
    note.say(carried);
    carried = "";
    note.carry = (text) => {
      carried = text; // said again once the page is drawn anew
    };
    root.append(
      h("h2", {}, "Skills"),
      h("p", { class: "muted" }, "The model sees each attached skill's name and description, and loads its instructions when a task calls for it."),
      skillTable(ctx, skills, agent, bound, note),
      note,
      section("Write a skill", writeForm(ctx)),
      section("From the registry", ...registry(ctx)),
      section("From a repository or a URL", sourceForm(ctx)),
    );
  },
};
