// The console's management pages, in the order the Manage tab lists them. Each
// page is a module of its own in this folder whose default export is
//   { id, title, render(root, ctx) }
// `root` is the (emptied) element the page fills; `ctx` carries what every page
// needs: ctx.api (the signed-in Api), ctx.agent() (the agent picked in the side
// bar, or null), ctx.guarded(fn) (wraps a handler: its error goes to the error
// bar), ctx.showError(message), and ctx.refresh() (renders the page again).
// A page renders API answers as text (dom.js's h()), never as HTML.

import agents from "./agents.js";
import integrations from "./integrations.js";
import keys from "./keys.js";
import knowledge from "./knowledge.js";
import mcps from "./mcps.js";
import memories from "./memories.js";
import plans from "./plans.js";
import tools from "./tools.js";

export const PAGES = [
  agents,
  mcps,
  tools,
  integrations,
  knowledge,
  memories,
  plans,
  keys,
];
