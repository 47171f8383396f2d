#include "grammar/grammar.h"

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <map>
#include <utility>

namespace dsv4::grammar {

Expr Expr::byte_range(uint8_t lo, uint8_t hi) {
  Expr e;
  e.kind = Kind::kBytes;
  e.lo = lo;
  e.hi = hi;
  return e;
}

Expr Expr::literal(std::string_view bytes) {
  std::vector<Expr> parts;
  for (const char c : bytes) {
    parts.push_back(byte_range(static_cast<uint8_t>(c), static_cast<uint8_t>(c)));
  }
  return seq(std::move(parts));
}

namespace {

// A sequence or alternation of `parts`; of one part, that part.
Expr combine(Expr::Kind kind, std::vector<Expr> parts) {
  if (parts.size() == 1) return std::move(parts[0]);
  Expr e;
  e.kind = kind;
  e.parts = std::move(parts);
  return e;
}

}  // namespace

Expr Expr::seq(std::vector<Expr> parts) { return combine(Kind::kSeq, std::move(parts)); }
Expr Expr::alt(std::vector<Expr> parts) { return combine(Kind::kAlt, std::move(parts)); }

Expr Expr::repeat(Expr part, int32_t min, int32_t max) {
  Expr e;
  e.kind = Kind::kRepeat;
  e.min = min;
  e.max = max;
  e.parts.push_back(std::move(part));
  return e;
}

Expr Expr::call(int32_t rule) {
  Expr e;
  e.kind = Kind::kCall;
  e.rule = rule;
  return e;
}

int64_t Expr::size() const {
  int64_t n = 1;
  for (const Expr& p : parts) n += p.size();
  return n;
}

Expr Expr::ordered(std::vector<Expr> members, const std::vector<bool>& needed,
                   const Expr& separator, bool nonempty) {
  Expr e;
  e.kind = Kind::kOrdered;
  e.min = nonempty ? 1 : 0;
  for (size_t i = 0; i < members.size(); ++i) {
    if (i > 0) e.parts.push_back(separator);
    e.parts.push_back(repeat(std::move(members[i]), needed[i] ? 1 : 0, 1));
  }
  return e;
}

int32_t Grammar::next(int32_t state, uint8_t byte) const {
  const State& s = states[static_cast<size_t>(state)];
  // Binary search over the sorted, disjoint ranges.
  int32_t lo = s.byte_begin, hi = s.byte_end;
  while (lo < hi) {
    const int32_t mid = (lo + hi) / 2;
    const ByteEdge& e = byte_edges[static_cast<size_t>(mid)];
    if (byte < e.lo) {
      hi = mid;
    } else if (byte > e.hi) {
      lo = mid + 1;
    } else {
      return e.to;
    }
  }
  return -1;
}

int32_t GrammarBuilder::add_rule(std::string name) {
  names_.push_back(std::move(name));
  bodies_.emplace_back();
  defined_.push_back(false);
  return static_cast<int32_t>(bodies_.size()) - 1;
}

void GrammarBuilder::define(int32_t rule, Expr body) {
  defined_nodes_ += body.size();
  bodies_[static_cast<size_t>(rule)] = std::move(body);
  defined_[static_cast<size_t>(rule)] = true;
}

Result<Expr> GrammarBuilder::ordered(const std::string& name, std::vector<Expr> members,
                                     const std::vector<bool>& needed, const Expr& separator) {
  const size_t n = members.size();
  // The nodes made below, counted first: each member once, a separator per gap and per block,
  // a few nodes around each.
  int64_t total = 4;
  for (const Expr& m : members) total += m.size() + 2 * separator.size() + 4;
  if (total > nodes_left()) {
    std::string message = std::to_string(n);
    message.append(" members in order take ")
        .append(std::to_string(total))
        .append(" grammar nodes, more than the ")
        .append(std::to_string(std::max<int64_t>(nodes_left(), 0)))
        .append(" left");
    return resource_exhausted(message);
  }
  if (n <= kOrderedBlock) return Expr::ordered(std::move(members), needed, separator, false);
  const size_t blocks = (n + kOrderedBlock - 1) / kOrderedBlock;
  // For each block b but the first: block[b] writes one of its members or more, then goes on
  // with after_one[b + 1]; after_one[b] is what may follow once a member before block b was
  // written, none_yet[b] the same while none was. Block 0 is inlined in what this returns.
  std::vector<int32_t> block(blocks, -1), after_one(blocks + 1, -1), none_yet(blocks + 1, -1);
  for (size_t b = 1; b < blocks; ++b) {
    const std::string from =
        std::string(name).append(": members from ").append(std::to_string(b * kOrderedBlock));
    block[b] = add_rule(std::string(from).append(", one or more"));
    after_one[b] = add_rule(std::string(from).append(", after one"));
    none_yet[b] = add_rule(std::string(from).append(", none yet"));
  }
  Expr first;
  for (size_t b = blocks; b-- > 0;) {
    const size_t begin = b * kOrderedBlock, end = std::min(n, begin + kOrderedBlock);
    const bool last = b + 1 == blocks;
    const std::vector<bool> block_needed(needed.begin() + static_cast<std::ptrdiff_t>(begin),
                                         needed.begin() + static_cast<std::ptrdiff_t>(end));
    const bool all_optional =
        std::find(block_needed.begin(), block_needed.end(), true) == block_needed.end();
    std::vector<Expr> in_block(
        std::make_move_iterator(members.begin() + static_cast<std::ptrdiff_t>(begin)),
        std::make_move_iterator(members.begin() + static_cast<std::ptrdiff_t>(end)));
    Expr some = Expr::ordered(std::move(in_block), block_needed, separator, true);
    if (!last) some = Expr::seq({std::move(some), Expr::call(after_one[b + 1])});
    // Past the last block nothing follows; a block of optional members may be skipped whole.
    const auto skip = [&](const std::vector<int32_t>& next) {
      return last ? Expr::empty() : Expr::call(next[b + 1]);
    };
    std::vector<Expr> none = {b == 0 ? std::move(some) : Expr::call(block[b])};
    if (all_optional) none.push_back(skip(none_yet));
    if (b == 0) {
      first = Expr::alt(std::move(none));
      break;
    }
    define(block[b], std::move(some));
    define(none_yet[b], Expr::alt(std::move(none)));
    std::vector<Expr> after = {Expr::seq({separator, Expr::call(block[b])})};
    if (all_optional) after.push_back(skip(after_one));
    define(after_one[b], Expr::alt(std::move(after)));
  }
  return first;
}

namespace {

// One rule's NFA (Thompson's construction).
struct Nfa {
  struct Node {
    std::vector<int32_t> eps;
    std::vector<Grammar::ByteEdge> bytes;
    std::vector<Grammar::CallEdge> calls;
  };
  std::vector<Node> nodes;
  int64_t budget = GrammarBuilder::kMaxNfaNodes;  // nodes left for all rules together

  int32_t add() {
    nodes.emplace_back();
    return static_cast<int32_t>(nodes.size()) - 1;
  }
  // Adds `e` between a new start and end node; false when the budget runs out.
  bool emit(const Expr& e, int32_t from, int32_t to) {
    if (--budget < 0) return false;
    switch (e.kind) {
      case Expr::Kind::kBytes:
        nodes[static_cast<size_t>(from)].bytes.push_back({e.lo, e.hi, to});
        return true;
      case Expr::Kind::kCall:
        nodes[static_cast<size_t>(from)].calls.push_back({e.rule, to});
        return true;
      case Expr::Kind::kAlt:
        for (const Expr& p : e.parts) {
          if (!emit(p, from, to)) return false;
        }
        return true;
      case Expr::Kind::kSeq: {
        int32_t at = from;
        for (const Expr& p : e.parts) {
          const int32_t next = add();
          if (!emit(p, at, next)) return false;
          at = next;
        }
        nodes[static_cast<size_t>(at)].eps.push_back(to);
        return true;
      }
      case Expr::Kind::kRepeat:
        return emit_repeat(e, from, to);
      case Expr::Kind::kOrdered:
        return emit_ordered(e, from, to);
    }
    return false;
  }
  // Members in order (Expr::kOrdered) through two nodes per member: next[i], "the next member
  // written is i or a later one" (at the start, and past a separator), and after[i], "member i
  // was the last written". Member i goes once from next[i] to after[i], a separator once from
  // after[i] to next[i + 1], so what may follow a member is shared by every way of reaching it
  // and the NFA grows with the members, not with their pairs.
  bool emit_ordered(const Expr& e, int32_t from, int32_t to) {
    const size_t n = (e.parts.size() + 1) / 2;
    // rest_optional[i]: no member from i on is needed, so the list may end before i.
    std::vector<bool> rest_optional(n + 1, true);
    for (size_t i = n; i-- > 0;) {
      rest_optional[i] = rest_optional[i + 1] && e.parts[2 * i].min == 0;
    }
    if (rest_optional[0] && e.min == 0) nodes[static_cast<size_t>(from)].eps.push_back(to);
    if (n == 0) return true;
    std::vector<int32_t> next(n), after(n);
    for (size_t i = 0; i < n; ++i) {
      next[i] = add();
      after[i] = add();
    }
    nodes[static_cast<size_t>(from)].eps.push_back(next[0]);
    for (size_t i = 0; i < n; ++i) {
      const Expr& member = e.parts[2 * i];  // repeat(the member, 0 or 1, 1)
      if (--budget < 0 || !emit(member.parts[0], next[i], after[i])) return false;
      if (i + 1 == n) {
        nodes[static_cast<size_t>(after[i])].eps.push_back(to);
        break;
      }
      if (member.min == 0) nodes[static_cast<size_t>(next[i])].eps.push_back(next[i + 1]);
      if (!emit(e.parts[2 * i + 1], after[i], next[i + 1])) return false;
      if (rest_optional[i + 1]) nodes[static_cast<size_t>(after[i])].eps.push_back(to);
    }
    return true;
  }
  bool emit_repeat(const Expr& e, int32_t from, int32_t to) {
    const Expr& part = e.parts[0];
    int32_t at = from;
    for (int32_t i = 0; i < e.min; ++i) {
      const int32_t next = add();
      if (!emit(part, at, next)) return false;
      at = next;
    }
    if (e.max == Expr::kUnbounded) {
      // at -> part -> at, at -> to (a loop node of its own, so the mandatory copies stay out).
      const int32_t loop = add();
      nodes[static_cast<size_t>(at)].eps.push_back(loop);
      if (!emit(part, loop, loop)) return false;
      nodes[static_cast<size_t>(loop)].eps.push_back(to);
      return true;
    }
    for (int32_t i = e.min; i < e.max; ++i) {
      nodes[static_cast<size_t>(at)].eps.push_back(to);  // stop here
      const int32_t next = add();
      if (!emit(part, at, next)) return false;
      at = next;
    }
    nodes[static_cast<size_t>(at)].eps.push_back(to);
    return true;
  }

  // The epsilon closure of `set`, sorted. Marks by generation, so a closure costs its own size,
  // not the NFA's.
  std::vector<int32_t> closure(std::vector<int32_t> set) const {
    if (mark.size() != nodes.size()) mark.assign(nodes.size(), 0);
    ++generation;
    std::vector<int32_t> todo = set;
    set.clear();
    while (!todo.empty()) {
      const int32_t n = todo.back();
      todo.pop_back();
      if (mark[static_cast<size_t>(n)] == generation) continue;
      mark[static_cast<size_t>(n)] = generation;
      set.push_back(n);
      for (const int32_t m : nodes[static_cast<size_t>(n)].eps) todo.push_back(m);
    }
    std::sort(set.begin(), set.end());
    return set;
  }
  mutable std::vector<uint32_t> mark;
  mutable uint32_t generation = 0;
};

// Steps of the subset construction allowed for a whole grammar (~0.1 s), so that no
// request can make compiling run away within the state cap.
constexpr int64_t kMaxWork = int64_t{1} << 25;

// The subset construction of one rule into `g`; its states are appended. Returns the start.
// `work` counts its steps across rules.
Result<int32_t> determinize(const Nfa& nfa, int32_t start, int32_t accept, Grammar& g,
                            int64_t& work) {
  std::map<std::vector<int32_t>, int32_t> ids;
  std::vector<std::vector<int32_t>> sets;
  auto id_of = [&](std::vector<int32_t> set) -> int32_t {
    auto [it, added] = ids.emplace(std::move(set), static_cast<int32_t>(g.states.size()));
    if (added) {
      sets.push_back(it->first);
      g.states.push_back({});
    }
    return it->second;
  };
  const int32_t start_state = id_of(nfa.closure({start}));
  for (size_t done = 0; done < sets.size(); ++done) {
    if (static_cast<int64_t>(g.states.size()) > GrammarBuilder::kMaxStates) {
      return resource_exhausted("the grammar has more than " +
                                std::to_string(GrammarBuilder::kMaxStates) +
                                " states (a schema, pattern or bound too large)");
    }
    const std::vector<int32_t> set = sets[done];  // copy: id_of may grow `sets`
    const int32_t state = start_state + static_cast<int32_t>(done);
    // Byte edges: cut [0, 255] at every range boundary, then each piece's target set.
    std::vector<int> cuts = {0, 256};
    std::vector<Grammar::ByteEdge> member_edges;
    std::map<int32_t, std::vector<int32_t>> calls;  // rule -> targets
    bool final = false;
    for (const int32_t n : set) {
      const Nfa::Node& node = nfa.nodes[static_cast<size_t>(n)];
      final = final || n == accept;
      for (const Grammar::ByteEdge& e : node.bytes) {
        cuts.push_back(e.lo);
        cuts.push_back(e.hi + 1);
        member_edges.push_back(e);
      }
      for (const Grammar::CallEdge& c : node.calls) calls[c.rule].push_back(c.to);
    }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    work += static_cast<int64_t>(cuts.size() * member_edges.size() + set.size());
    if (work > kMaxWork) {
      return resource_exhausted(
          "the grammar is too large to compile (a schema, pattern or bound "
          "whose automaton has too many overlapping alternatives)");
    }
    std::vector<Grammar::ByteEdge> edges;
    for (size_t i = 0; i + 1 < cuts.size(); ++i) {
      const int lo = cuts[i], hi = cuts[i + 1] - 1;
      std::vector<int32_t> target;
      for (const Grammar::ByteEdge& e : member_edges) {
        if (e.lo <= lo && hi <= e.hi) target.push_back(e.to);
      }
      if (target.empty()) continue;
      const int32_t to = id_of(nfa.closure(std::move(target)));
      if (!edges.empty() && edges.back().to == to && edges.back().hi + 1 == lo) {
        edges.back().hi = static_cast<uint8_t>(hi);
      } else {
        edges.push_back({static_cast<uint8_t>(lo), static_cast<uint8_t>(hi), to});
      }
    }
    Grammar::State& s = g.states[static_cast<size_t>(state)];
    s.final = final;
    s.byte_begin = static_cast<int32_t>(g.byte_edges.size());
    g.byte_edges.insert(g.byte_edges.end(), edges.begin(), edges.end());
    s.byte_end = static_cast<int32_t>(g.byte_edges.size());
    std::vector<Grammar::CallEdge> call_edges;
    for (auto& [rule, targets] : calls) call_edges.push_back({rule, id_of(nfa.closure(targets))});
    Grammar::State& t = g.states[static_cast<size_t>(state)];  // id_of may have moved it
    t.call_begin = static_cast<int32_t>(g.call_edges.size());
    g.call_edges.insert(g.call_edges.end(), call_edges.begin(), call_edges.end());
    t.call_end = static_cast<int32_t>(g.call_edges.size());
  }
  return start_state;
}

// Whether each rule can match the empty string (a fixpoint: a final state reachable from the
// start through calls of rules that can).
std::vector<bool> nullable_rules(const Grammar& g) {
  std::vector<bool> nullable(g.rule_start.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < g.rule_start.size(); ++r) {
      if (nullable[r]) continue;
      std::vector<int32_t> todo = {g.rule_start[r]}, seen;
      while (!todo.empty() && !nullable[r]) {
        const int32_t s = todo.back();
        todo.pop_back();
        if (std::find(seen.begin(), seen.end(), s) != seen.end()) continue;
        seen.push_back(s);
        const Grammar::State& st = g.states[static_cast<size_t>(s)];
        if (st.final) nullable[r] = changed = true;
        for (int32_t c = st.call_begin; c < st.call_end; ++c) {
          const Grammar::CallEdge& e = g.call_edges[static_cast<size_t>(c)];
          if (nullable[static_cast<size_t>(e.rule)]) todo.push_back(e.to);
        }
      }
    }
  }
  return nullable;
}

// A rule that calls itself (directly or through others) before reading a byte, if any.
int32_t left_recursive_rule(const Grammar& g) {
  const std::vector<bool> nullable = nullable_rules(g);
  const size_t n = g.rule_start.size();
  // first[r]: the rules r may call before reading a byte.
  std::vector<std::vector<int32_t>> first(n);
  for (size_t r = 0; r < n; ++r) {
    std::vector<int32_t> todo = {g.rule_start[r]}, seen;
    while (!todo.empty()) {
      const int32_t s = todo.back();
      todo.pop_back();
      if (std::find(seen.begin(), seen.end(), s) != seen.end()) continue;
      seen.push_back(s);
      const Grammar::State& st = g.states[static_cast<size_t>(s)];
      for (int32_t c = st.call_begin; c < st.call_end; ++c) {
        const Grammar::CallEdge& e = g.call_edges[static_cast<size_t>(c)];
        first[r].push_back(e.rule);
        if (nullable[static_cast<size_t>(e.rule)]) todo.push_back(e.to);
      }
    }
  }
  // A cycle in `first` (depth-first search, colours 0 new, 1 on the path, 2 done).
  std::vector<int> colour(n, 0);
  std::vector<std::pair<int32_t, size_t>> path;
  for (size_t root = 0; root < n; ++root) {
    if (colour[root] != 0) continue;
    path.push_back({static_cast<int32_t>(root), 0});
    colour[root] = 1;
    while (!path.empty()) {
      auto& [r, i] = path.back();
      if (i == first[static_cast<size_t>(r)].size()) {
        colour[static_cast<size_t>(r)] = 2;
        path.pop_back();
        continue;
      }
      const int32_t next = first[static_cast<size_t>(r)][i++];
      if (colour[static_cast<size_t>(next)] == 1) return next;
      if (colour[static_cast<size_t>(next)] == 0) {
        colour[static_cast<size_t>(next)] = 1;
        path.push_back({next, 0});
      }
    }
  }
  return -1;
}

}  // namespace

Result<Grammar> GrammarBuilder::build(int32_t root) const {
  Grammar g;
  g.rule_names = names_;
  g.root = root;
  Nfa nfa;
  int64_t work = 0;
  for (size_t r = 0; r < bodies_.size(); ++r) {
    if (!defined_[r]) return internal_error("grammar rule " + names_[r] + " is never defined");
    nfa.nodes.clear();
    nfa.mark.clear();
    const int32_t start = nfa.add(), accept = nfa.add();
    if (!nfa.emit(bodies_[r], start, accept)) {
      return resource_exhausted("the grammar has more than " + std::to_string(kMaxNfaNodes) +
                                " nodes (a schema, pattern or bound too large)");
    }
    DSV4_ASSIGN_OR_RETURN(const int32_t start_state, determinize(nfa, start, accept, g, work));
    g.rule_start.push_back(start_state);
  }
  const int32_t recursive = left_recursive_rule(g);
  if (recursive >= 0) {
    return invalid_argument(names_[static_cast<size_t>(recursive)] +
                            " refers to itself before any text (left recursion, e.g. a $ref "
                            "cycle through anyOf): no document could ever finish it");
  }
  return g;
}

}  // namespace dsv4::grammar
