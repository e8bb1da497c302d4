// The console's management pages, in the order the Manage tab lists them. Each
// page is a module of its own in this folder whose default export is
//   { id, title, render(root, ctx) }
// `root` is the (emptied) element the page fills; `ctx` carries what every page
// needs: ctx.api (the signed-in Api), ctx.agent() (the agent picked in the side
// bar, or null), ctx.guarded(fn) (wraps a handler: its error goes to the error
// bar), ctx.showError(message), and ctx.refresh() (renders the page again).
// A page renders API answers as text (dom.js's h()), never as HTML.

export const PAGES = [];
