// One thread that runs a task beside the caller's: the batch makes its constrained sequences'
// token masks there while its own thread waits on the model's forward (a GPU step), so the
// masks cost the step nothing when they take less time than the forward.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace dsv4::runtime {

class HelperThread {
 public:
  HelperThread();
  // Waits for the task in hand, then ends the thread.
  ~HelperThread();
  HelperThread(const HelperThread&) = delete;
  HelperThread& operator=(const HelperThread&) = delete;

  // Runs `task` on the thread; the one before must have been waited for.
  void start(std::function<void()> task);
  // Returns once the task started last is done (at once when none is); what it threw is thrown
  // here.
  void wait();

 private:
  void work();

  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::function<void()> task_;  // under mutex_: the task to run, empty once it ran
  std::exception_ptr thrown_;   // under mutex_
  bool stopping_ = false;       // under mutex_
  std::thread thread_;          // last: starts once everything above exists
};

}  // namespace dsv4::runtime
