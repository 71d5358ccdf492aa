/**
 * Where a batch's time goes: milliseconds per phase (wall clock, and this process's CPU time,
 * which tells the batch's own work from waiting on PostgreSQL or on other processes sharing the
 * cores) and the SQL statements, filled in when a caller (the benchmark) passes one; the service
 * itself runs without.
 */
export class BatchTrace {
  readonly phases: Record<string, number> = {};
  readonly cpu: Record<string, number> = {};
  roundTrips = 0;
  private last = performance.now();
  private lastCpu = process.cpuUsage();

  /** Ends the phase running since the previous mark (or the trace's start). */
  mark(phase: string): void {
    const now = performance.now();
    const cpu = process.cpuUsage();
    this.phases[phase] = (this.phases[phase] ?? 0) + (now - this.last);
    this.cpu[phase] = (this.cpu[phase] ?? 0) + (cpu.user - this.lastCpu.user + cpu.system - this.lastCpu.system) / 1000;
    this.last = now;
    this.lastCpu = cpu;
  }
}
