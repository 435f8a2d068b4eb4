// The lineage tree of lineage.html (coevo/run/lineage_page.py), inlined into the page.
// Candidate text is data: it is only ever written with textContent, never parsed as markup.
// A node's children and its detail are built the first time they are opened.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("lineage-data").textContent);
  var nodes = data.nodes;
  var children = nodes.map(function () { return []; });
  var roots = [];
  nodes.forEach(function (node, index) {
    (node.parent === null ? roots : children[node.parent]).push(index);
  });
  var keys = {};
  nodes.forEach(function (node, index) { keys[node.key] = index; });
  var items = [];  // each node's list item, once built
  var depths = [];  // each built node's depth in the tree

  function element(tag, className, text) {
    var made = document.createElement(tag);
    if (className) made.className = className;
    if (text !== undefined) made.textContent = text;
    return made;
  }

  function field(name, value) {
    var span = element("span", "field " + name);
    span.appendChild(element("span", "field-name", name + " "));
    span.appendChild(element("span", "field-value", value));
    return span;
  }

  function item(index, depth) {
    var node = nodes[index];
    var li = element("li", "node");
    li.id = "node-" + index;
    li.setAttribute("data-key", node.key);
    if (node.ancestor) li.classList.add("ancestor");
    if (index === data.answer) li.classList.add("answer");
    if (node.score === "invalid") li.classList.add("invalid");
    var row = element("div", "row");
    var toggle = element("button", "toggle", children[index].length ? "\u25b8" : "\u00b7");
    toggle.type = "button";
    toggle.disabled = children[index].length === 0;
    toggle.setAttribute("aria-expanded", "false");
    toggle.title = children[index].length + " children";
    var label = element("button", "label");
    label.type = "button";
    label.appendChild(element("span", "key", node.key));
    label.appendChild(field("score", node.score));
    label.appendChild(field("operator", node.operator));
    label.appendChild(field("model", node.model));
    if (data.islands) label.appendChild(field("island", node.island));
    if (children[index].length) label.appendChild(field("children", String(children[index].length)));
    row.appendChild(toggle);
    row.appendChild(label);
    li.appendChild(row);
    toggle.addEventListener("click", function () { setOpen(index, toggle.getAttribute("aria-expanded") !== "true"); });
    label.addEventListener("click", function () { setDetail(index, !li.classList.contains("open-detail")); });
    items[index] = li;
    depths[index] = depth;
    if (depth < data.open_depth) setOpen(index, true);
    return li;
  }

  function setOpen(index, open) {
    var li = items[index];
    if (!children[index].length) return;
    var list = li.querySelector(":scope > ul");
    if (open && !list) {
      list = element("ul");
      children[index].forEach(function (child) { list.appendChild(item(child, depths[index] + 1)); });
      li.appendChild(list);
    }
    if (list) list.hidden = !open;
    var toggle = li.querySelector(":scope > .row > .toggle");
    toggle.setAttribute("aria-expanded", String(open));
    toggle.textContent = open ? "\u25be" : "\u25b8";
  }

  function setDetail(index, open) {
    var li = items[index];
    var detail = li.querySelector(":scope > .detail");
    if (open && !detail) {
      detail = buildDetail(nodes[index]);
      li.insertBefore(detail, li.querySelector(":scope > ul"));
    }
    if (detail) detail.hidden = !open;
    li.classList.toggle("open-detail", open);
  }

  function buildDetail(node) {
    var detail = element("div", "detail");
    var table = element("table");
    var rows = [
      ["key", node.key], ["score (search objective)", node.score], ["operator", node.operator],
      ["generation", String(node.generation)], ["model", node.model], ["weights", node.weights],
      ["prompt", node.prompt],
    ];
    if (data.islands) rows.push(["island", node.island]);
    rows.forEach(function (pair) {
      var tr = element("tr");
      tr.appendChild(element("th", "", pair[0]));
      tr.appendChild(element("td", "", pair[1]));
      table.appendChild(tr);
    });
    var parents = element("tr");
    parents.appendChild(element("th", "", "parents"));
    var cell = element("td");
    if (!node.parents.length) cell.textContent = "none";
    node.parents.forEach(function (key) {
      if (key in keys) {
        var link = element("button", "parent-link", key);
        link.type = "button";
        link.addEventListener("click", function () { reveal(keys[key]); });
        cell.appendChild(link);
      } else {
        cell.appendChild(element("span", "parent-link", key + " (not stored)"));
      }
    });
    parents.appendChild(cell);
    table.appendChild(parents);
    detail.appendChild(table);
    detail.appendChild(element("p", "", "Thought:"));
    detail.appendChild(element("pre", "prose thought", node.thought || "(none)"));
    if (node.reason !== null) {
      detail.appendChild(element("p", "", "Why it is invalid:"));
      detail.appendChild(element("pre", "prose reason", node.reason));
    }
    var against = node.parent === null ? "no stored parent, every line is new" : nodes[node.parent].key;
    detail.appendChild(element("p", "", "Diff against its parent (" + against + "):"));
    var diff = element("pre", "diff");
    node.diff.split("\n").forEach(function (line) {
      var kind = /^(\+\+\+|---) /.test(line) ? "file" : line[0] === "+" ? "add" : line[0] === "-" ? "del" :
        line.slice(0, 2) === "@@" ? "hunk" : "same";
      diff.appendChild(element("span", kind, line));
    });
    if (!node.diff) diff.appendChild(element("span", "same", "(the same code as its parent)"));
    detail.appendChild(diff);
    return detail;
  }

  function openPathTo(index) {
    var path = [];
    for (var at = nodes[index].parent; at !== null; at = nodes[at].parent) path.unshift(at);
    path.forEach(function (ancestor) { setOpen(ancestor, true); });
  }

  function reveal(index) {
    openPathTo(index);
    setDetail(index, true);
    items[index].scrollIntoView({block: "center"});
    items[index].querySelector(".label").focus();
  }

  function openAll() {
    var pending = roots.slice();
    while (pending.length) {
      var index = pending.pop();
      setOpen(index, true);
      Array.prototype.push.apply(pending, children[index]);
    }
  }

  function closeAll() {
    items.forEach(function (built, index) { setOpen(index, false); });
  }

  var tree = document.getElementById("lineage");
  roots.forEach(function (index) { tree.appendChild(item(index, 0)); });
  if (data.answer !== null) openPathTo(data.answer);
  var showAnswer = document.getElementById("show-answer");
  showAnswer.disabled = data.answer === null;
  showAnswer.addEventListener("click", function () { reveal(data.answer); });
  document.getElementById("open-all").addEventListener("click", openAll);
  document.getElementById("close-all").addEventListener("click", closeAll);
})();
