set breakpoint pending on
set pagination off
set confirm off
break uct_mm_ep_am_bcopy
break uct_mm_ep_am_short
run
python
import gdb
pc = int(gdb.parse_and_eval("$pc"))
fn = gdb.execute("info symbol $pc", to_string=True)
off = 138 if "bcopy" in fn else 141
print("first shared-memory send of this process: " + fn.strip())
gdb.execute("delete")
gdb.execute("tbreak *%d" % (pc + off))
end
continue
printf "HOLE: FIFO element reserved (head CAS succeeded), not published; SIGKILL now\n"
info symbol $pc
kill
quit
