// The Markdown renderer of the console (/playground/markdown.js) and of the public
// chat page (/c/_/markdown.js): one file, which both routers serve from this
// folder, each under its own page's Content-Security-Policy. It cannot inject
// HTML: it builds elements and text nodes only (no HTML string is ever parsed),
// so "<script>" or "<img onerror=...>" in a reply shows as those characters. It
// knows paragraphs, headings, lists, block quotes, fenced code blocks with their
// language, highlighted (highlight.js), tables, rules, inline `code`, **bold**,
// *italic*, ~~strike~~ and links.
//
// Links are inert until clicked: http(s) and mailto only, opened in a new tab
// with no referrer and no opener; an image (![alt](url)) is shown as a link to
// it, never loaded, so a reply cannot make the browser fetch anything by itself.

import { highlight } from "./highlight.js";

function text(s) {
  return document.createTextNode(s);
}

function el(tag, cls, ...children) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  node.append(...children);
  return node;
}

// underscores emphasise whole words only (as GitHub's Markdown): "window.__x" is text
const INLINE =
  /(`[^`\n]+`)|(\*\*[^*\n]+\*\*|(?<!\w)__(?!\s)[^_\n]+(?<!\s)__(?!\w))|(\*[^*\n]+\*|(?<!\w)_(?!\s)[^_\n]+(?<!\s)_(?!\w))|(~~[^~\n]+~~)|(!?\[[^\]\n]*\]\([^)\s]+\))/;

function safeHref(href) {
  try {
    const url = new URL(href, "https://invalid.example/");
    if (url.origin === "https://invalid.example") return null; // relative: not ours to follow
    return ["http:", "https:", "mailto:"].includes(url.protocol) ? url.href : null;
  } catch {
    return null;
  }
}

function link(token) {
  const image = token.startsWith("!");
  const body = image ? token.slice(1) : token;
  const close = body.indexOf("](");
  const label = body.slice(1, close);
  const href = safeHref(body.slice(close + 2, -1));
  if (!href) return text(token);
  const a = el("a", image ? "md-image-link" : "md-link");
  a.href = href;
  a.target = "_blank";
  a.rel = "noopener noreferrer nofollow";
  a.referrerPolicy = "no-referrer";
  a.title = href;
  if (image) a.append(text(`image: ${label || href}`));
  else a.append(...inline(label || href));
  return a;
}

/** The inline Markdown of one line as nodes. */
export function inline(source) {
  const out = [];
  let rest = source;
  while (rest) {
    const m = INLINE.exec(rest);
    if (!m) {
      out.push(text(rest));
      break;
    }
    if (m.index > 0) out.push(text(rest.slice(0, m.index)));
    const token = m[0];
    if (m[1]) out.push(el("code", null, text(token.slice(1, -1))));
    else if (m[2]) out.push(el("strong", null, ...inline(token.slice(2, -2))));
    else if (m[3]) out.push(el("em", null, ...inline(token.slice(1, -1))));
    else if (m[4]) out.push(el("del", null, ...inline(token.slice(2, -2))));
    else out.push(link(token));
    rest = rest.slice(m.index + token.length);
  }
  return out;
}

function codeBlock(info, lines) {
  const language = (info.trim().split(/\s+/)[0] || "").replace(/[^\w+#.-]/g, "");
  const code = el("code", language ? `language-${language}` : null, ...highlight(lines.join("\n"), language));
  const pre = el("pre", "md-code", code);
  if (language) pre.dataset.language = language;
  return pre;
}

const cells = (line) =>
  line
    .trim()
    .replace(/^\|/, "")
    .replace(/\|$/, "")
    .split("|")
    .map((c) => c.trim());
const TABLE_RULE = /^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$/;

function table(head, rows) {
  const thead = el("thead", null, el("tr", null, ...cells(head).map((c) => el("th", null, ...inline(c)))));
  const tbody = el("tbody", null, ...rows.map((r) => el("tr", null, ...cells(r).map((c) => el("td", null, ...inline(c))))));
  return el("div", "md-table", el("table", null, thead, tbody));
}

/** The Markdown ``source`` as a DocumentFragment of safe elements. */
export function render(source) {
  const frag = document.createDocumentFragment();
  const lines = String(source ?? "").replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  let para = [];
  const flush = () => {
    if (!para.length) return;
    const p = el("p");
    para.forEach((line, n) => {
      if (n) p.append(el("br"));
      p.append(...inline(line));
    });
    frag.append(p);
    para = [];
  };
  const bullet = /^\s*([-*+]|\d+[.)])\s+/;
  while (i < lines.length) {
    const line = lines[i];
    const fence = /^\s*(```+|~~~+)(.*)$/.exec(line);
    if (fence) {
      flush();
      const body = [];
      i += 1;
      while (i < lines.length && !lines[i].trimStart().startsWith(fence[1])) body.push(lines[i++]);
      frag.append(codeBlock(fence[2], body));
      // the closing fence (or the end of a reply still streaming); what follows it
      // on its line (`` ```". `` in a quoting reply) is text, not lost
      const after = i < lines.length ? lines[i].trimStart().slice(fence[1].length) : "";
      i += 1;
      if (after.trim()) para.push(after);
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    if (heading) {
      flush();
      frag.append(el(`h${Math.min(6, heading[1].length + 2)}`, "md-heading", ...inline(heading[2])));
      i += 1;
      continue;
    }
    if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) {
      flush();
      frag.append(el("hr"));
      i += 1;
      continue;
    }
    if (line.includes("|") && i + 1 < lines.length && TABLE_RULE.test(lines[i + 1])) {
      flush();
      const rows = [];
      i += 2;
      while (i < lines.length && lines[i].includes("|") && lines[i].trim()) rows.push(lines[i++]);
      frag.append(table(line, rows));
      continue;
    }
    if (bullet.test(line)) {
      flush();
      const ordered = /^\s*\d+[.)]/.test(line);
      const list = el(ordered ? "ol" : "ul");
      while (i < lines.length && bullet.test(lines[i])) {
        list.append(el("li", null, ...inline(lines[i].replace(bullet, ""))));
        i += 1;
      }
      frag.append(list);
      continue;
    }
    if (/^>\s?/.test(line)) {
      flush();
      const body = [];
      while (i < lines.length && /^>\s?/.test(lines[i])) body.push(lines[i++].replace(/^>\s?/, ""));
      frag.append(el("blockquote", null, render(body.join("\n"))));
      continue;
    }
    if (!line.trim()) flush();
    else para.push(line);
    i += 1;
  }
  flush();
  return frag;
}
