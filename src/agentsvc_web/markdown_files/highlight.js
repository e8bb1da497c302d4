// A small syntax highlighter for the code blocks of a reply: it splits the code
// into comments, strings, numbers and keywords and wraps each in a <span> with a
// class (tok-com, tok-str, tok-num, tok-kw); everything else stays a text node.
// No HTML is parsed and no style is inline (the page's CSP forbids it): the
// colours are the page's style sheet's (app.css, page.css). It knows the usual shapes of Python, JavaScript and
// TypeScript, shell, JSON, SQL, Go, Rust, Java and C; an unknown language gets
// strings, numbers and comments only.

const KEYWORDS = {
  python:
    "and as assert async await break class continue def del elif else except False finally for from global if import in is lambda None nonlocal not or pass raise return True try while with yield",
  js: "async await break case catch class const continue default delete do else export extends false finally for from function if import in instanceof let new null of return static super switch this throw true try typeof undefined var void while yield interface type enum implements",
  sh: "if then else elif fi for while do done case esac function in export local return echo exit set unset",
  sql: "select from where insert into values update set delete create table drop alter and or not null join left right inner outer on group by order limit offset as distinct having union primary key references index",
  go: "break case chan const continue default defer else fallthrough for func go goto if import interface map package range return select struct switch type var nil true false",
  rust: "as async await break const continue crate else enum extern false fn for if impl in let loop match mod move mut pub ref return self Self static struct super trait true type unsafe use where while",
  c: "auto break case char const continue default do double else enum extern float for goto if int long register return short signed sizeof static struct switch typedef union unsigned void volatile while class public private protected new null true false import package",
};
const ALIASES = {
  py: "python", python: "python", js: "js", javascript: "js", ts: "js", typescript: "js",
  jsx: "js", tsx: "js", mjs: "js", sh: "sh", bash: "sh", shell: "sh", zsh: "sh", console: "sh",
  sql: "sql", go: "go", rust: "rust", rs: "rust", c: "c", cpp: "c", "c++": "c", java: "c",
  cs: "c", csharp: "c", kotlin: "c", json: "json",
};
const sets = Object.fromEntries(
  Object.entries(KEYWORDS).map(([k, words]) => [k, new Set(words.split(" "))]),
);

function tokenRule(lang) {
  const hash = ["python", "sh"].includes(lang) || !lang;
  const slash = !["python", "sh", "sql", "json"].includes(lang);
  const parts = [
    slash ? String.raw`\/\/[^\n]*|\/\*[\s\S]*?\*\/` : null, // 1: comments
    hash ? String.raw`#[^\n]*` : null,
    lang === "sql" ? String.raw`--[^\n]*` : null,
  ].filter(Boolean);
  const comment = parts.length ? `(${parts.join("|")})` : "(?!)";
  const string = String.raw`("""[\s\S]*?"""|'''[\s\S]*?'''|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|\x60(?:[^\x60\\]|\\.)*\x60)`;
  const number = String.raw`(\b\d[\d_]*(?:\.\d+)?(?:[eE][+-]?\d+)?\b)`;
  const word = String.raw`([A-Za-z_$][\w$]*)`;
  return new RegExp(`${comment}|${string}|${number}|${word}`, "g");
}

function span(cls, value) {
  const el = document.createElement("span");
  el.className = cls;
  el.textContent = value;
  return el;
}

/** The nodes of ``code`` highlighted as ``language`` (a fence's info word). */
export function highlight(code, language) {
  const lang = ALIASES[String(language || "").toLowerCase()] ?? "";
  const keywords = sets[lang] ?? (lang === "json" ? new Set(["true", "false", "null"]) : new Set());
  const rule = tokenRule(lang);
  const out = [];
  let last = 0;
  for (const m of code.matchAll(rule)) {
    const [token, com, str, num, word] = m;
    let cls = null;
    if (com) cls = "tok-com";
    else if (str) cls = "tok-str";
    else if (num) cls = "tok-num";
    else if (word && (keywords.has(word) || (lang === "sql" && keywords.has(word.toLowerCase())))) cls = "tok-kw";
    if (!cls) continue;
    if (m.index > last) out.push(document.createTextNode(code.slice(last, m.index)));
    out.push(span(cls, token));
    last = m.index + token.length;
  }
  if (last < code.length) out.push(document.createTextNode(code.slice(last)));
  return out;
}
