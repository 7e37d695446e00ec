# Reads `raco test` output; prints each failing check (the file it came from and the
# rackunit block) and each file that exited non-zero or timed out, with the lines just
# before it, so that the last lines of a CI log say what failed.
/^raco test: "/ { file = $0; sub(/^raco test: /, "", file); k = 0; next }
/^--------------------$/ {
  if (inblock) { if (bad) { print "in " file ":"; printf "%s\n", block; n++ }
                 inblock = 0; block = ""; bad = 0 }
  else inblock = 1
  next
}
inblock { block = block "  " $0 "\n"; if ($0 ~ /^(FAILURE|ERROR)$/) bad = 1; next }
/raco test: non-zero exit|timeout after [0-9]+ seconds/ {
  print "in " file ": " $0
  for (i = (k > 8 ? k - 8 : 0); i < k; i++) print "  | " last[i % 8]
  print ""; n++; next
}
{ last[k % 8] = $0; k++ }
END { if (n == 0) print "(no rackunit failure block found; see the log above)" }
