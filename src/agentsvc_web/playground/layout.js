// The page's frame: dark or light (the system's choice until the user picks one,
// kept in localStorage), and the side bar as a drawer on a narrow screen (a
// button opens it over the chat; Escape, the backdrop or opening a thread closes
// it), so the chat is what a phone shows first.

import { $ } from "./dom.js";

const THEME_ITEM = "agentsvc.playground.theme";
const THEMES = ["auto", "light", "dark"];

function applyTheme(theme) {
  const root = document.documentElement;
  if (theme === "auto") delete root.dataset.theme;
  else root.dataset.theme = theme;
  const button = $("theme-toggle");
  button.textContent = `Theme: ${theme}`;
  button.setAttribute("aria-label", `Colour theme: ${theme} (change)`);
}

export function startTheme() {
  let theme = localStorage.getItem(THEME_ITEM);
  if (!THEMES.includes(theme)) theme = "auto";
  applyTheme(theme);
  $("theme-toggle").addEventListener("click", () => {
    theme = THEMES[(THEMES.indexOf(theme) + 1) % THEMES.length];
    localStorage.setItem(THEME_ITEM, theme);
    applyTheme(theme);
  });
}

export function setDrawer(open) {
  document.body.classList.toggle("drawer-open", open);
  $("drawer-toggle").setAttribute("aria-expanded", String(open));
  if (open) $("side").querySelector("button, select, input")?.focus();
}

export function startDrawer() {
  $("drawer-toggle").addEventListener("click", () => {
    setDrawer(!document.body.classList.contains("drawer-open"));
  });
  $("drawer-backdrop").addEventListener("click", () => setDrawer(false));
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && document.body.classList.contains("drawer-open")) {
      setDrawer(false);
      $("drawer-toggle").focus();
    }
  });
}

/** Arrow keys, Home and End move between the tabs (the WAI-ARIA tabs pattern). */
export function tabKeys(tabs, activate) {
  for (const tab of tabs) {
    tab.addEventListener("keydown", (e) => {
      const i = tabs.indexOf(tab);
      const to = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: tabs.length - 1 }[e.key];
      if (to === undefined) return;
      e.preventDefault();
      const next = tabs[(to + tabs.length) % tabs.length];
      next.focus();
      activate(next);
    });
  }
}
