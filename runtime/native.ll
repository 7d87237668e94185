; relayjit's native runtime support: the kernel thread pool and the graph run loop.
;
; Compiled once per process by runtime/native.py (which fills in {pause} and {pause_decl},
; the CPU's spin-wait hint) and registered with LLVM, so kernel objects resolve
; @relayjit_parallel_for against it.
;
; The pool (fork/join, static partition, chunks claimed by whoever comes first):
;   relayjit_parallel_for(fn, closure, n) runs fn(closure, begin, end) over [0, n) split into
;   at most num_threads contiguous chunks that differ by at most one iteration (chunk k is
;   [k*n/tasks, (k+1)*n/tasks): which thread runs it does not change the result);
;   relayjit_parallel_for_max(fn, closure, n, max) into at most max of them (0: no cap), the
;   thread count the kernel found its loop's work pays for. The caller and the workers
;   claim chunks one at a time (claim_chunks), the caller until none is left, then it waits
;   for the chunks being run: a worker whose core is busy elsewhere when the job comes never
;   holds the caller up, it finds the chunks taken. Workers wait for a new job by spinning on
;   @generation (pause, with a sched_yield every 256 spins so an oversubscribed machine still
;   makes progress), then block on a condition variable, so an idle process burns no CPU.
;   One job at a time: a caller that finds the pool busy (another thread's kernel, or a
;   parallel loop nested in a task) runs its whole range serially, which is always correct.
;   num_threads <= 1 means no worker threads at all.
;   Workers start lazily on the first job after the thread count was set and stop (joined)
;   when it changes, at interpreter exit, and are forgotten in a forked child.
;
; Memory ordering: the job fields are plain stores published by the release store of @claim
; (and the seq_cst store of @generation after it) and read after a successful acq_rel
; compare-and-swap of @claim for the job; @status is published by each chunk's release
; increment of @done, read after the caller's acquire load of it. @sleepers/@generation form
; a Dekker pair (both seq_cst), so a job is never missed by a worker going to sleep: it
; either sees the new generation or the caller sees it sleeping and broadcasts under the
; mutex.

@generation = internal global i64 0, align 64
@done = internal global i64 0, align 64
@claim = internal global i64 0, align 64
@status = internal global i32 0, align 64
@busy = internal global i32 0, align 64
@sleepers = internal global i32 0, align 64
@job_fn = internal global ptr null, align 64
@job_closure = internal global ptr null, align 8
@job_n = internal global i64 0, align 8
@job_tasks = internal global i64 0, align 8
@num_threads = internal global i32 1, align 64
@num_workers = internal global i32 0, align 4
@shutdown = internal global i32 0, align 4
@spawn_generation = internal global i64 0, align 8
@mutex = internal global [128 x i8] zeroinitializer, align 64
@cond = internal global [128 x i8] zeroinitializer, align 64
@threads = internal global [1024 x i64] zeroinitializer, align 64

declare i32 @pthread_create(ptr, ptr, ptr, ptr)
declare i32 @pthread_join(i64, ptr)
declare i32 @pthread_mutex_init(ptr, ptr)
declare i32 @pthread_mutex_lock(ptr)
declare i32 @pthread_mutex_unlock(ptr)
declare i32 @pthread_cond_init(ptr, ptr)
declare i32 @pthread_cond_wait(ptr, ptr)
declare i32 @pthread_cond_broadcast(ptr)
declare i32 @sched_yield()
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)
{pause_decl}

; spin-wait step: the pause hint, or sched_yield every 256th spin
define internal void @relax(i64 %spins) {
entry:
  %low = and i64 %spins, 255
  %yield = icmp eq i64 %low, 255
  br i1 %yield, label %do_yield, label %do_pause
do_yield:
  %r = call i32 @sched_yield()
  ret void
do_pause:
  {pause}
  ret void
}

; begin of chunk k of n split into tasks chunks: k * n / tasks (no overflow for n < 2^53)
define internal i64 @chunk_begin(i64 %k, i64 %n, i64 %tasks) {
entry:
  %p = mul i64 %k, %n
  %b = udiv i64 %p, %tasks
  ret i64 %b
}

define internal i32 @run_chunk(i64 %k) {
entry:
  %fn = load ptr, ptr @job_fn
  %closure = load ptr, ptr @job_closure
  %n = load i64, ptr @job_n
  %tasks = load i64, ptr @job_tasks
  %b = call i64 @chunk_begin(i64 %k, i64 %n, i64 %tasks)
  %k1 = add i64 %k, 1
  %e = call i64 @chunk_begin(i64 %k1, i64 %n, i64 %tasks)
  %st = call i32 %fn(ptr %closure, i64 %b, i64 %e)
  ret i32 %st
}

define internal ptr @worker(ptr %arg) {
entry:
  %start = load i64, ptr @spawn_generation
  br label %wait
wait:
  %seen = phi i64 [ %start, %entry ], [ %g, %done ]
  br label %spin
spin:
  %spins = phi i64 [ 0, %wait ], [ %spins1, %spin_more ]
  %g0 = load atomic i64, ptr @generation acquire, align 8
  %new0 = icmp ne i64 %g0, %seen
  br i1 %new0, label %got, label %spin_more
spin_more:
  %spins1 = add i64 %spins, 1
  call void @relax(i64 %spins)
  %long = icmp ugt i64 %spins1, 20000
  br i1 %long, label %sleep, label %spin
sleep:
  %l = call i32 @pthread_mutex_lock(ptr @mutex)
  %s0 = atomicrmw add ptr @sleepers, i32 1 seq_cst
  br label %sleep_check
sleep_check:
  %g1 = load atomic i64, ptr @generation seq_cst, align 8
  %new1 = icmp ne i64 %g1, %seen
  br i1 %new1, label %woken, label %sleep_wait
sleep_wait:
  %w = call i32 @pthread_cond_wait(ptr @cond, ptr @mutex)
  br label %sleep_check
woken:
  %s1 = atomicrmw sub ptr @sleepers, i32 1 seq_cst
  %u = call i32 @pthread_mutex_unlock(ptr @mutex)
  br label %got
got:
  %g = load atomic i64, ptr @generation acquire, align 8
  %stop = load atomic i32, ptr @shutdown acquire, align 4
  %is_stop = icmp ne i32 %stop, 0
  br i1 %is_stop, label %exit, label %job
job:
  call void @claim_chunks(i64 %g)
  br label %done
done:
  br label %wait
exit:
  ret ptr null
}

; run the chunks of job %gen nobody has claimed yet, one at a time, until none is left or
; the job is over. @claim = (job generation mod 2^32) << 32 | tasks << 16 | next chunk: a
; chunk is claimed by a compare-and-swap that also checks the job, so a worker that wakes
; late (its core busy elsewhere) finds the chunks taken and never holds the caller up, and
; one that saw an older job cannot claim a chunk of a newer one.
define internal void @claim_chunks(i64 %gen) {
entry:
  %gen32 = and i64 %gen, 4294967295
  br label %try
try:
  %c = load atomic i64, ptr @claim acquire, align 8
  %cg = lshr i64 %c, 32
  %same = icmp eq i64 %cg, %gen32
  br i1 %same, label %check, label %out
check:
  %k = and i64 %c, 65535
  %t16 = lshr i64 %c, 16
  %tasks = and i64 %t16, 65535
  %left = icmp ult i64 %k, %tasks
  br i1 %left, label %cas, label %out
cas:
  %c1 = add i64 %c, 1
  %pair = cmpxchg ptr @claim, i64 %c, i64 %c1 acq_rel monotonic
  %ok = extractvalue { i64, i1 } %pair, 1
  br i1 %ok, label %run, label %try
run:
  %st = call i32 @run_chunk(i64 %k)
  %failed = icmp ne i32 %st, 0
  br i1 %failed, label %record, label %count
record:
  %o = atomicrmw or ptr @status, i32 %st monotonic
  br label %count
count:
  %d = atomicrmw add ptr @done, i64 1 release
  br label %try
out:
  ret void
}

; wake every sleeping worker (after @generation changed)
define internal void @wake_all() {
entry:
  %s = load atomic i32, ptr @sleepers seq_cst, align 4
  %any = icmp ne i32 %s, 0
  br i1 %any, label %wake, label %out
wake:
  %l = call i32 @pthread_mutex_lock(ptr @mutex)
  %b = call i32 @pthread_cond_broadcast(ptr @cond)
  %u = call i32 @pthread_mutex_unlock(ptr @mutex)
  br label %out
out:
  ret void
}

; join all workers; the caller holds @busy
define internal void @stop_workers() {
entry:
  %w = load i32, ptr @num_workers
  %none = icmp eq i32 %w, 0
  br i1 %none, label %out, label %stop
stop:
  store atomic i32 1, ptr @shutdown release, align 4
  %g = atomicrmw add ptr @generation, i64 1 seq_cst
  %l = call i32 @pthread_mutex_lock(ptr @mutex)
  %b = call i32 @pthread_cond_broadcast(ptr @cond)
  %u = call i32 @pthread_mutex_unlock(ptr @mutex)
  %n = zext i32 %w to i64
  br label %join
join:
  %i = phi i64 [ 0, %stop ], [ %i1, %join ]
  %slot = getelementptr inbounds [1024 x i64], ptr @threads, i64 0, i64 %i
  %t = load i64, ptr %slot
  %j = call i32 @pthread_join(i64 %t, ptr null)
  %i1 = add i64 %i, 1
  %more = icmp ult i64 %i1, %n
  br i1 %more, label %join, label %joined
joined:
  store i32 0, ptr @num_workers
  store atomic i32 0, ptr @shutdown release, align 4
  br label %out
out:
  ret void
}

; start num_threads - 1 workers (fewer if pthread_create fails); the caller holds @busy
define internal void @start_workers() {
entry:
  %t = load i32, ptr @num_threads
  %want32 = sub i32 %t, 1
  %want = zext i32 %want32 to i64
  %g = load atomic i64, ptr @generation acquire, align 8
  store i64 %g, ptr @spawn_generation
  %any = icmp ugt i64 %want, 0
  br i1 %any, label %create, label %out
create:
  %i = phi i64 [ 0, %entry ], [ %i1, %created ]
  %slot = getelementptr inbounds [1024 x i64], ptr @threads, i64 0, i64 %i
  %id = add i64 %i, 1
  %arg = inttoptr i64 %id to ptr
  %rc = call i32 @pthread_create(ptr %slot, ptr null, ptr @worker, ptr %arg)
  %ok = icmp eq i32 %rc, 0
  br i1 %ok, label %created, label %out
created:
  %i1 = add i64 %i, 1
  %more = icmp ult i64 %i1, %want
  br i1 %more, label %create, label %out
out:
  %made = phi i64 [ 0, %entry ], [ %i, %create ], [ %i1, %created ]
  %made32 = trunc i64 %made to i32
  store i32 %made32, ptr @num_workers
  ret void
}

define i32 @relayjit_parallel_for(ptr %fn, ptr %closure, i64 %n) {
entry:
  %s = call i32 @relayjit_parallel_for_max(ptr %fn, ptr %closure, i64 %n, i64 0)
  ret i32 %s
}

; as relayjit_parallel_for, on at most %max threads (0: as many as the pool has; 1: serial,
; on the caller, without touching the pool): the kernel's own cap from its work
define i32 @relayjit_parallel_for_max(ptr %fn, ptr %closure, i64 %n, i64 %max) {
entry:
  %t = load atomic i32, ptr @num_threads monotonic, align 4
  %one = icmp sle i32 %t, 1
  %small = icmp sle i64 %n, 1
  %capped = icmp eq i64 %max, 1
  %one_or_small = or i1 %one, %small
  %serial_now = or i1 %one_or_small, %capped
  br i1 %serial_now, label %serial, label %try_lock
try_lock:
  %pair = cmpxchg ptr @busy, i32 0, i32 1 acquire monotonic
  %locked = extractvalue { i32, i1 } %pair, 1
  br i1 %locked, label %check_workers, label %serial
serial:
  %s = call i32 %fn(ptr %closure, i64 0, i64 %n)
  ret i32 %s
check_workers:
  %w = load i32, ptr @num_workers
  %t2 = load i32, ptr @num_threads
  %want = sub i32 %t2, 1
  %ready = icmp eq i32 %w, %want
  br i1 %ready, label %launch, label %restart
restart:
  call void @stop_workers()
  call void @start_workers()
  br label %launch
launch:
  %w2 = load i32, ptr @num_workers
  %w64 = zext i32 %w2 to i64
  %all = add i64 %w64, 1
  %fewer = icmp ult i64 %n, %all
  %tasks0 = select i1 %fewer, i64 %n, i64 %all
  %limited = icmp ne i64 %max, 0
  %below = icmp ult i64 %max, %tasks0
  %cut = and i1 %limited, %below
  %tasks = select i1 %cut, i64 %max, i64 %tasks0
  store ptr %fn, ptr @job_fn
  store ptr %closure, ptr @job_closure
  store i64 %n, ptr @job_n
  store i64 %tasks, ptr @job_tasks
  store i32 0, ptr @status
  store i64 0, ptr @done
  ; the claim word of the job about to be published, then the job (only the holder of
  ; @busy changes @generation)
  %g0 = load atomic i64, ptr @generation monotonic, align 8
  %g = add i64 %g0, 1
  %g32 = and i64 %g, 4294967295
  %ghi = shl i64 %g32, 32
  %thi = shl i64 %tasks, 16
  %word = or i64 %ghi, %thi
  store atomic i64 %word, ptr @claim release, align 8
  store atomic i64 %g, ptr @generation seq_cst, align 8
  call void @wake_all()
  call void @claim_chunks(i64 %g)
  br label %join
join:
  %spins = phi i64 [ 0, %launch ], [ %spins1, %join_more ]
  %d = load atomic i64, ptr @done acquire, align 8
  %finished = icmp eq i64 %d, %tasks
  br i1 %finished, label %out, label %join_more
join_more:
  %spins1 = add i64 %spins, 1
  call void @relax(i64 %spins)
  br label %join
out:
  %st = load i32, ptr @status
  store atomic i32 0, ptr @busy release, align 4
  ret i32 %st
}

; take @busy, waiting for a running job to finish
define internal void @acquire_pool() {
entry:
  br label %try
try:
  %spins = phi i64 [ 0, %entry ], [ %spins1, %wait ]
  %pair = cmpxchg ptr @busy, i32 0, i32 1 acquire monotonic
  %locked = extractvalue { i32, i1 } %pair, 1
  br i1 %locked, label %out, label %wait
wait:
  %spins1 = add i64 %spins, 1
  call void @relax(i64 %spins)
  br label %try
out:
  ret void
}

; set the thread count (workers restart lazily at the next job); n is checked by the caller
define void @relayjit_pool_set_threads(i32 %n) {
entry:
  call void @acquire_pool()
  call void @stop_workers()
  store atomic i32 %n, ptr @num_threads monotonic, align 4
  store atomic i32 0, ptr @busy release, align 4
  ret void
}

define i32 @relayjit_pool_get_threads() {
entry:
  %t = load atomic i32, ptr @num_threads monotonic, align 4
  ret i32 %t
}

define i32 @relayjit_pool_num_workers() {
entry:
  %w = load atomic i32, ptr @num_workers monotonic, align 4
  ret i32 %w
}

; join the workers (interpreter exit); the next job starts them again
define void @relayjit_pool_shutdown() {
entry:
  call void @acquire_pool()
  call void @stop_workers()
  store atomic i32 0, ptr @busy release, align 4
  ret void
}

; init at load, and again in a forked child: the child has none of the parent's threads
define void @relayjit_pool_reset() {
entry:
  %m = call i32 @pthread_mutex_init(ptr @mutex, ptr null)
  %c = call i32 @pthread_cond_init(ptr @cond, ptr null)
  store i32 0, ptr @num_workers
  store i32 0, ptr @sleepers
  store i32 0, ptr @shutdown
  store i32 0, ptr @busy
  ret void
}

; The graph run loop: fns[i](args[i]) for i in [0, n); 0, or 1 + the index of the first step
; that returned a nonzero status, which is stored to *status.
define i32 @relayjit_run_steps(ptr %fns, ptr %args, i64 %n, ptr %status) {
entry:
  %empty = icmp eq i64 %n, 0
  br i1 %empty, label %ok, label %step
step:
  %i = phi i64 [ 0, %entry ], [ %i1, %next ]
  %fslot = getelementptr inbounds ptr, ptr %fns, i64 %i
  %f = load ptr, ptr %fslot
  %aslot = getelementptr inbounds ptr, ptr %args, i64 %i
  %a = load ptr, ptr %aslot
  %st = call i32 %f(ptr %a)
  %failed = icmp ne i32 %st, 0
  br i1 %failed, label %fail, label %next
next:
  %i1 = add i64 %i, 1
  %more = icmp ult i64 %i1, %n
  br i1 %more, label %step, label %ok
fail:
  store i32 %st, ptr %status
  %i2 = add i64 %i, 1
  %idx = trunc i64 %i2 to i32
  ret i32 %idx
ok:
  ret i32 0
}

; A run-loop step that copies args[2] bytes from args[1] to args[0] (a reshape whose input and
; output the memory plan put in different storage).
define i32 @relayjit_copy_step(ptr %args) {
entry:
  %dst = load ptr, ptr %args
  %s1 = getelementptr inbounds ptr, ptr %args, i64 1
  %src = load ptr, ptr %s1
  %s2 = getelementptr inbounds ptr, ptr %args, i64 2
  %np = load ptr, ptr %s2
  %n = ptrtoint ptr %np to i64
  call void @llvm.memcpy.p0.p0.i64(ptr %dst, ptr %src, i64 %n, i1 false)
  ret i32 0
}
