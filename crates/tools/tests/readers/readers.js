// How Node reads the values Rampart's tool predicates check (issue 35): the same protocol
// as readers.py (JSON lines in: {i, kind, value}; out: {i, reader, readings}).
"use strict";
const path = require("path");
const readline = require("readline");

const rl = readline.createInterface({ input: process.stdin, terminal: false });
const out = [];
rl.on("line", (line) => {
  const { i, kind, value } = JSON.parse(line);
  const emit = (reader, f) => {
    let readings = [];
    try {
      const r = f(value);
      if (r !== null && r !== undefined && r !== "") readings = [r];
    } catch (e) {
      readings = [];
    }
    out.push(JSON.stringify({ i, reader, readings }));
  };
  if (kind === "path") {
    emit("node.path.resolve", (v) => path.posix.resolve(v));
    emit("node.path.normalize", (v) => path.posix.normalize(v));
    emit("node.decodeURIComponent+resolve", (v) => path.posix.resolve(decodeURIComponent(v)));
  } else if (kind === "url") {
    emit("node.URL", (v) => new URL(v).hostname);
  }
});
rl.on("close", () => {
  process.stdout.write(out.join("\n") + (out.length ? "\n" : ""));
});
