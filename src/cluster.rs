//! Connected components over near-duplicate edges (docs/algorithm.md §6).
//!
//! The join reports edges between *distinct* fingerprints; documents with the
//! same fingerprint are already one group. Components are therefore computed
//! over fingerprints, and each is labelled by its smallest fingerprint: a label
//! that depends only on the edges, never on their order or on partitioning.

use std::collections::HashMap;

/// Union-find over `u64` nodes with path halving and union by size.
#[derive(Debug, Default)]
pub struct UnionFind {
    index: HashMap<u64, usize>,
    nodes: Vec<u64>,
    parent: Vec<usize>,
    size: Vec<u32>,
}

impl UnionFind {
    fn id(&mut self, node: u64) -> usize {
        if let Some(&i) = self.index.get(&node) {
            return i;
        }
        let i = self.nodes.len();
        self.index.insert(node, i);
        self.nodes.push(node);
        self.parent.push(i);
        self.size.push(1);
        i
    }

    fn root(&mut self, mut i: usize) -> usize {
        while self.parent[i] != i {
            self.parent[i] = self.parent[self.parent[i]];
            i = self.parent[i];
        }
        i
    }

    /// Join the components of `a` and `b`.
    pub fn union(&mut self, a: u64, b: u64) {
        let (ia, ib) = (self.id(a), self.id(b));
        let (ra, rb) = (self.root(ia), self.root(ib));
        if ra == rb {
            return;
        }
        let (big, small) = if self.size[ra] >= self.size[rb] { (ra, rb) } else { (rb, ra) };
        self.parent[small] = big;
        self.size[big] += self.size[small];
    }

    /// `(node, label)` for every node seen, the label being the smallest node
    /// of its component; sorted by node.
    pub fn labels(mut self) -> Vec<(u64, u64)> {
        let n = self.nodes.len();
        let mut min_of_root: HashMap<usize, u64> = HashMap::new();
        let roots: Vec<usize> = (0..n).map(|i| self.root(i)).collect();
        for (i, &r) in roots.iter().enumerate() {
            let e = min_of_root.entry(r).or_insert(self.nodes[i]);
            *e = (*e).min(self.nodes[i]);
        }
        let mut out: Vec<(u64, u64)> = (0..n).map(|i| (self.nodes[i], min_of_root[&roots[i]])).collect();
        out.sort_unstable();
        out
    }
}

/// Component labels of the nodes touched by `edges`.
pub fn components<I: IntoIterator<Item = (u64, u64)>>(edges: I) -> Vec<(u64, u64)> {
    let mut uf = UnionFind::default();
    for (a, b) in edges {
        uf.union(a, b);
    }
    uf.labels()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_merge_and_label_with_the_minimum() {
        let labels = components([(5, 9), (9, 2), (7, 8)]);
        assert_eq!(labels, [(2, 2), (5, 2), (7, 7), (8, 7), (9, 2)]);
    }

    #[test]
    fn edge_order_does_not_change_labels() {
        let edges = [(10, 11), (12, 13), (11, 12), (20, 21), (1, 20)];
        let mut reversed = edges;
        reversed.reverse();
        assert_eq!(components(edges), components(reversed));
        assert_eq!(components(edges).iter().filter(|(_, l)| *l == 1).count(), 3);
    }
}
