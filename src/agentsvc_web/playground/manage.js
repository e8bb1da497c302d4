// The Manage tab: a list of the areas a user configures (pages/index.js) and
// the page that is open. The open page is in the URL's hash (#manage/<id>), so
// a reload or a shared link opens it again; the key never goes in the URL.

import { $, h, put } from "./dom.js";
import { PAGES } from "./pages/index.js";

export class Manage {
  constructor(ctx) {
    this.ctx = ctx; // {api, agent(), guarded, showError, changed(pageId)}
    this.current = null;
  }

  /** The nav of pages, with the open one marked (aria-current). */
  renderNav() {
    const nav = $("manage-nav");
    put(
      nav,
      h(
        "ul",
        { class: "plain manage-pages" },
        PAGES.map((page) =>
          h(
            "li",
            {},
            h(
              "a",
              {
                href: `#manage/${page.id}`,
                "data-page": page.id,
                "aria-current": this.current?.id === page.id ? "page" : null,
              },
              page.title,
            ),
          ),
        ),
      ),
    );
  }

  /** Opens a page by id (the first one when the id is unknown). */
  async open(id) {
    const page = PAGES.find((p) => p.id === id) ?? PAGES[0];
    this.current = page ?? null;
    this.renderNav();
    const root = put($("manage-page"));
    if (!page) {
      root.append(h("p", { class: "muted" }, "No page yet."));
      return;
    }
    root.dataset.page = page.id;
    // a page refreshes after each change it makes: the side bar's lists (agents,
    // MCP servers) are read again first, so they show what the page changed
    const ctx = {
      ...this.ctx,
      refresh: async () => {
        await this.ctx.changed?.(page.id);
        return this.open(page.id);
      },
    };
    await page.render(root, ctx);
  }
}

/** The page id the hash names (#manage/<id>), or null. */
export function pageOfHash(hash) {
  const m = /^#manage\/([a-z0-9-]+)$/.exec(hash || "");
  return m ? m[1] : null;
}
