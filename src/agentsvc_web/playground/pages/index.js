// The console's management pages, in the order the Manage tab lists them. Each
// page is a module of its own in this folder whose default export is
//   { id, title, render(root, ctx) }
// `root` is the (emptied) element the page fills; `ctx` carries what every page
// needs: ctx.api (the signed-in Api), ctx.agent() (the agent picked in the side
// bar, or null), ctx.guarded(fn) (wraps a handler: its error goes to the error
// bar), ctx.showError(message), and ctx.refresh() (renders the page again).
// A page renders API answers as text (dom.js's h()), never as HTML.

import agents from "./agents.js";
import channels from "./channels.js";
import codeSessions from "./code_sessions.js";
import integrations from "./integrations.js";
import keys from "./keys.js";
import knowledge from "./knowledge.js";
import mcps from "./mcps.js";
import memories from "./memories.js";
import orgSettings from "./org_settings.js";
import plans from "./plans.js";
import publishing from "./publishing.js";
import runners from "./runners.js";
import scheduledTasks from "./scheduled_tasks.js";
import skills from "./skills.js";
import tools from "./tools.js";
import webhooks from "./webhooks.js";

export const PAGES = [
  agents,
  mcps,
  tools,
  integrations,
  knowledge,
  memories,
  plans,
  runners,
  scheduledTasks,
  publishing,
  skills,
  channels,
  codeSessions,
  keys,
  webhooks,
  orgSettings,
];
