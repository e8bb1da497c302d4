// Building the page's elements. Everything an API answer holds goes in as a
// text node (or an attribute value), never as HTML: a stored message with
// "<script>" in it shows as those characters.

const SVG_NS = "http://www.w3.org/2000/svg";

function fill(el, attrs, children) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2), value);
    } else {
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** An HTML element: h("li", {class: "x"}, "text", otherNode). */
export function h(tag, attrs, ...children) {
  return fill(document.createElement(tag), attrs, children);
}

/** An SVG element (charts are drawn with these: no library, no inline style). */
export function s(tag, attrs, ...children) {
  return fill(document.createElementNS(SVG_NS, tag), attrs, children);
}

/** Replaces an element's children (null and false children are left out). */
export function put(el, ...children) {
  el.replaceChildren();
  return fill(el, {}, children);
}

export function clear(el) {
  el.replaceChildren();
  return el;
}

export const $ = (id) => document.getElementById(id);

/** JSON shown as indented text (arguments, results, span payloads). */
export function pretty(value) {
  if (typeof value === "string") return value;
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}
