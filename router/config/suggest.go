package config

// suggest returns the candidate nearest to s if it is close enough to be
// a likely typo, or "".
func suggest(s string, candidates []string) string {
	best, bestDist := "", -1
	for _, c := range candidates {
		d := distance(s, c)
		if bestDist < 0 || d < bestDist {
			best, bestDist = c, d
		}
	}
	// Allow one edit for short words, up to a third of the word for longer ones.
	limit := max(1, len(s)/3)
	if bestDist < 0 || bestDist > limit {
		return ""
	}
	return best
}

// distance returns the optimal string alignment distance between a and b
// in bytes: insertions, deletions, substitutions and transpositions of
// adjacent bytes ("nmae" is one edit from "name").
func distance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		// Long keys are never typos of ours; keep fuzzing cheap.
		return max(len(a), len(b))
	}
	// Three rows: i-2, i-1 and i.
	pp := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], pp[j-2]+1)
			}
		}
		pp, prev, cur = prev, cur, pp
	}
	return prev[len(b)]
}
