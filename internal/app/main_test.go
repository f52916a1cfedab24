package app_test

import "testing"

// TestMain stops the chromium the browser tests share (newBrowser) once
// every test has run.
func TestMain(m *testing.M) {
	defer chromiums.Close()
	m.Run()
}
