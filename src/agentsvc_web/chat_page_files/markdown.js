// A small Markdown renderer that cannot inject HTML: it builds elements and text
// nodes only (no HTML string is ever parsed), so "<script>" in a reply shows as
// those characters. What it knows: paragraphs, headings (#, ##, ###), fenced code
// blocks, "-"/"*" and "1." lists, block quotes, and inline `code`, **bold**,
// *italic*/_italic_ and [links](https://...) (http, https and mailto only).

function text(s) {
  return document.createTextNode(s);
}

const INLINE = /(`[^`\n]+`)|(\*\*[^*\n]+\*\*)|(\*[^*\n]+\*|\b_[^_\n]+_\b)|(\[[^\]\n]+\]\([^)\s]+\))/;

function safeHref(href) {
  try {
    const url = new URL(href, "https://invalid.example/");
    if (url.origin === "https://invalid.example") return null; // relative: not ours to follow
    return ["http:", "https:", "mailto:"].includes(url.protocol) ? url.href : null;
  } catch {
    return null;
  }
}

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
    if (m[1]) {
      const el = document.createElement("code");
      el.append(text(token.slice(1, -1)));
      out.push(el);
    } else if (m[2]) {
      const el = document.createElement("strong");
      el.append(...inline(token.slice(2, -2)));
      out.push(el);
    } else if (m[3]) {
      const el = document.createElement("em");
      el.append(...inline(token.slice(1, -1)));
      out.push(el);
    } else {
      const close = token.indexOf("](");
      const label = token.slice(1, close);
      const href = safeHref(token.slice(close + 2, -1));
      if (href) {
        const a = document.createElement("a");
        a.href = href;
        a.target = "_blank";
        a.rel = "noopener noreferrer nofollow";
        a.append(...inline(label));
        out.push(a);
      } else {
        out.push(text(token));
      }
    }
    rest = rest.slice(m.index + token.length);
  }
  return out;
}

/** The Markdown ``source`` as a DocumentFragment of safe elements. */
export function render(source) {
  const frag = document.createDocumentFragment();
  const lines = String(source).replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  let para = [];
  const flush = () => {
    if (!para.length) return;
    const p = document.createElement("p");
    para.forEach((line, n) => {
      if (n) p.append(document.createElement("br"));
      p.append(...inline(line));
    });
    frag.append(p);
    para = [];
  };
  while (i < lines.length) {
    const line = lines[i];
    if (/^```/.test(line)) {
      flush();
      const body = [];
      i += 1;
      while (i < lines.length && !/^```/.test(lines[i])) body.push(lines[i++]);
      i += 1;
      const pre = document.createElement("pre");
      const code = document.createElement("code");
      code.append(text(body.join("\n")));
      pre.append(code);
      frag.append(pre);
      continue;
    }
    const heading = /^(#{1,3})\s+(.*)$/.exec(line);
    if (heading) {
      flush();
      const el = document.createElement(`h${heading[1].length + 2}`);
      el.append(...inline(heading[2]));
      frag.append(el);
      i += 1;
      continue;
    }
    const bullet = /^\s*([-*]|\d+\.)\s+/;
    if (bullet.test(line)) {
      flush();
      const ordered = /^\s*\d+\./.test(line);
      const list = document.createElement(ordered ? "ol" : "ul");
      while (i < lines.length && bullet.test(lines[i])) {
        const li = document.createElement("li");
        li.append(...inline(lines[i].replace(bullet, "")));
        list.append(li);
        i += 1;
      }
      frag.append(list);
      continue;
    }
    if (/^>\s?/.test(line)) {
      flush();
      const quote = document.createElement("blockquote");
      const body = [];
      while (i < lines.length && /^>\s?/.test(lines[i])) body.push(lines[i++].replace(/^>\s?/, ""));
      quote.append(render(body.join("\n")));
      frag.append(quote);
      continue;
    }
    if (!line.trim()) flush();
    else para.push(line);
    i += 1;
  }
  flush();
  return frag;
}
