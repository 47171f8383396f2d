// A grammar over bytes, as structured outputs need it: a set of rules, each a deterministic
// automaton over bytes whose edges may also call another rule (and come back). Nested and
// recursive JSON needs the calls; each rule's own bytes (a string, a number, a regex) are plain
// DFA transitions. A sequence's position in it is a set of stacks of states (grammar/matcher.h).
//
// Rules are written as expressions (Expr: byte ranges, sequences, alternatives, bounded or
// unbounded repeats, calls) and compiled by GrammarBuilder: Thompson's construction into an NFA
// per rule, then the subset construction over the alphabet {byte ranges} ∪ {calls}. A rule that
// can call itself again before it reads a byte (left recursion: `{"$ref": "#"}`) is refused,
// because the stacks could then grow without reading anything.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dsv4/status.h"

namespace dsv4::grammar {

// A rule's body. Plain values, copied where used (GrammarBuilder::ordered counts its copies
// before it makes them).
struct Expr {
  // kOrdered (made by ordered() only): parts alternate members, each repeat(member, min, 1) with
  // min 0 (optional) or 1 (needed), and copies of the separator between them; min 1 when at
  // least one member must be written.
  enum class Kind { kBytes, kSeq, kAlt, kRepeat, kCall, kOrdered };
  Kind kind = Kind::kSeq;  // an empty kSeq matches the empty string
  uint8_t lo = 0, hi = 0;  // kBytes: one byte in [lo, hi]
  int32_t min = 0;         // kRepeat: parts[0] at least min times
  int32_t max = 0;         // and at most max times; kUnbounded: no limit
  int32_t rule = -1;       // kCall: the rule called
  std::vector<Expr> parts;

  static constexpr int32_t kUnbounded = -1;
  static Expr empty() { return Expr{}; }
  static Expr byte_range(uint8_t lo, uint8_t hi);
  static Expr literal(std::string_view bytes);
  static Expr seq(std::vector<Expr> parts);
  static Expr alt(std::vector<Expr> parts);
  static Expr repeat(Expr part, int32_t min, int32_t max);
  static Expr optional(Expr part) { return repeat(std::move(part), 0, 1); }
  static Expr call(int32_t rule);
  // `members` in their order, each left out or not unless `needed`, `separator` between the
  // ones written, as one automaton (kOrdered; at least one member when `nonempty`). Its own
  // node kind so that the NFA shares what may follow a member between every way of reaching it
  // (as nested regular expressions each member that may come first would carry a copy of the
  // rest). Its determinization still grows with members^2 - each state past a separator holds
  // the members left - so long lists go through GrammarBuilder::ordered.
  static Expr ordered(std::vector<Expr> members, const std::vector<bool>& needed,
                      const Expr& separator, bool nonempty);

  // This node and its parts', recursively.
  int64_t size() const;
};

// The compiled grammar. States of all rules share one numbering; edges are stored flat.
struct Grammar {
  struct ByteEdge {
    uint8_t lo, hi;  // bytes in [lo, hi] go to `to`; a state's edges are disjoint and sorted
    int32_t to;
  };
  struct CallEdge {
    int32_t rule;  // push this rule's start state ...
    int32_t to;    // ... and continue here once it returns
  };
  struct State {
    int32_t byte_begin, byte_end;  // into byte_edges
    int32_t call_begin, call_end;  // into call_edges
    bool final;                    // the rule may end here (return to the caller)
  };
  std::vector<State> states;
  std::vector<ByteEdge> byte_edges;
  std::vector<CallEdge> call_edges;
  std::vector<int32_t> rule_start;  // [rules] start state of each rule
  std::vector<std::string> rule_names;
  int32_t root = 0;  // the rule a whole document matches

  // The state `state` goes to on `byte`, or -1.
  int32_t next(int32_t state, uint8_t byte) const;
};

class GrammarBuilder {
 public:
  // Caps on what one request may compile to, so a schema cannot take unbounded memory or time.
  static constexpr int64_t kMaxNfaNodes = 1 << 20;
  static constexpr int64_t kMaxStates = 1 << 18;

  // A new rule, defined later (rules may call each other, and themselves, before they exist).
  int32_t add_rule(std::string name);
  void define(int32_t rule, Expr body);
  // Expression nodes left of kMaxNfaNodes after the rules defined so far (negative past it):
  // build() spends that budget a node per expression node (a repeat's part once per copy), so
  // an expression that cannot fit can be refused before it is made.
  int64_t nodes_left() const { return kMaxNfaNodes - defined_nodes_; }
  int32_t n_rules() const { return static_cast<int32_t>(bodies_.size()); }
  // Expr::ordered's list (a JSON object's properties, a DSML call's parameters) in blocks of
  // kOrderedBlock members, so that compiling it grows with the members: each block is one
  // automaton, and what may follow it (the later blocks, once a member was written or while
  // none was) are rules added here, named after `name`, that call the next block's. A long list
  // of optional members thus leaves a stack per block left at most while a member's first bytes
  // are read, none per member. More than nodes_left() nodes in all is refused (resource
  // exhausted) before they are made.
  Result<Expr> ordered(const std::string& name, std::vector<Expr> members,
                       const std::vector<bool>& needed, const Expr& separator);
  static constexpr size_t kOrderedBlock = 64;
  // Compiles every rule; `root` is what a whole document matches. Errors: a rule never defined,
  // a grammar over the caps, left recursion (naming the rule).
  Result<Grammar> build(int32_t root) const;

 private:
  std::vector<std::string> names_;
  std::vector<Expr> bodies_;
  std::vector<bool> defined_;
  int64_t defined_nodes_ = 0;
};

}  // namespace dsv4::grammar
