package dev.glimmer.server.webchat;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.logging.Level;
import org.openqa.selenium.chrome.ChromeDriver;
import org.openqa.selenium.chrome.ChromeDriverService;
import org.openqa.selenium.chrome.ChromeOptions;
import org.openqa.selenium.logging.LogType;
import org.openqa.selenium.logging.LoggingPreferences;

/**
 * Debian's headless Chromium driven through Debian's chromedriver, named explicitly so that Selenium
 * never tries to download a browser or a driver (these machines reach no such site).
 */
final class HeadlessChromium {
    static final Path CHROMIUM = Path.of("/usr/bin/chromium");
    static final Path CHROMEDRIVER = Path.of("/usr/bin/chromedriver");

    private HeadlessChromium() {}

    /** @param profile an empty folder for the browser's profile */
    static ChromeDriver start(Path profile) {
        for (Path p : new Path[] {CHROMIUM, CHROMEDRIVER}) {
            if (!Files.isExecutable(p)) {
                throw new IllegalStateException(p + " is missing: install Debian's chromium and chromium-driver "
                        + "(apt-get install chromium chromium-driver)");
            }
        }
        ChromeOptions options = new ChromeOptions();
        options.setBinary(CHROMIUM.toFile());
        options.addArguments(
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--window-size=1280,860",
                "--user-data-dir=" + profile);
        LoggingPreferences logs = new LoggingPreferences();
        logs.enable(LogType.BROWSER, Level.ALL);
        options.setCapability(ChromeOptions.LOGGING_PREFS, logs);
        ChromeDriverService service = new ChromeDriverService.Builder()
                .usingDriverExecutable(new File(CHROMEDRIVER.toString()))
                .usingAnyFreePort()
                .build();
        return new ChromeDriver(service, options);
    }
}
